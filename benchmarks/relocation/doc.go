// Package relocation holds the benchmarks of moving one live Actor
// (mesh.Manager.RelocateActor, issue #10): the latency of one move with a
// small state, the pause a sender sees while it moves, and the Restore
// stream of a 64 MiB state, each next to its physical baseline measured in
// the same run — the bare transport carrying what a move must send, the
// store round trips a move must make, and stock zmq4 carrying the same
// bytes. It has no code of its own; the benchmarks are in
// relocation_bench_test.go and use only exported API, as an application
// would.
//
//	go test -run '^$' -bench . -count 3 ./benchmarks/relocation |
//	  go run ./benchmarks/ratio 'BenchmarkRelocateActor=BenchmarkRelocateBaselineRoundTrips' ...
//
// benchmarks/run.sh runs it with the pairs; benchmarks/README.md keeps the
// figures.
package relocation
