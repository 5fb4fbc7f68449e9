// Package hostrelocate holds the benchmarks of host relocation
// ((*mesh.Node).Relocate, issue #11): every Actor a server node owns moved
// to the two other servers in one command, at most relocation.max_concurrent
// moves at once — how many handoffs per second, how long one handoff holds
// its object, the longest pause a sender sees while the command runs, and
// the Go heap while 100,000 objects move — each next to its physical
// ceiling measured in the same run: the same Location Store calls per
// object, by kind (rows read and absent, batches applied and refused, rows
// made, updated, deleted and only conditioned), on the same store at the
// same concurrency, and stock zmq4 carrying the same records at the same
// concurrency. It has no code of its own; the benchmarks are in
// hostrelocate_bench_test.go and use only exported API, as an application
// would.
//
// One op is one whole host Relocate of MESHNODE_BENCH_HOST_OBJECTS objects
// (default 10,000; MESHNODE_BENCH_HOST_HEAP_OBJECTS, default 100,000, for
// the heap benchmark), so run it with -benchtime 1x:
//
//	MESHNODE_BENCH_HOST_OBJECTS=500 scripts/with-redis.sh go test -run '^$' -bench . -benchtime 1x ./benchmarks/hostrelocate |
//	  go run ./benchmarks/ratio 'BenchmarkHostRelocateRedis=BenchmarkHostStoreCeilingRedis' ...
//
// benchmarks/run.sh runs it with the pairs; benchmarks/README.md keeps the
// figures.
package hostrelocate
