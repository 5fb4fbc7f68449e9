// Package discovery holds the discovery-at-scale benchmarks (issue 16): a
// simulated mesh of N MeshNode descriptors with live owner leases, and what
// one node's discovery rounds read from the store, before and after the
// Tracker. The code is in test files only.
package discovery
