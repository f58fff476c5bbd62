//go:build amd64 && !linux

package tensor

// amxPermitted is false: only Linux's permission request is known here.
func amxPermitted() bool { return false }
