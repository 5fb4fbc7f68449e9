//go:build !linux

package testredis

import "syscall"

// procAttr: without Pdeathsig (Linux only) a server outlives a test binary
// that crashes; an orderly end of the test still stops it.
func procAttr() *syscall.SysProcAttr { return nil }
