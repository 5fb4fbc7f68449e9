//go:build linux

package testredis

import "syscall"

// procAttr makes the kernel kill the server when the test binary dies.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
