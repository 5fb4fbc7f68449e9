// Package objects holds the benchmarks of the Objects layer (mesh.Manager):
// remote Actor creation and Actor messaging through the framework, each next
// to its physical baseline measured in the same run — the bare transport
// carrying a record of the same command and size, and the bare Location
// Store batch a creation needs at least. It has no code of its own; the
// benchmarks are in objects_bench_test.go and use only exported API, as an
// application would.
//
//	go test -run '^$' -bench . -count 5 ./benchmarks/objects |
//	  go run ./benchmarks/ratio 'BenchmarkCreateActor=BenchmarkTransportCreateRoundTrip' ...
//
// benchmarks/run.sh runs it with the pairs; benchmarks/README.md keeps the
// figures.
package objects
