package tensor

import (
	"sync"

	"golang.org/x/sys/unix"
)

// amxPermitted asks Linux, once per process, for permission to use AMX's
// tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux
// 5.16 on): without it the first tile instruction is a fatal signal. The
// kernel grants it process-wide, after checking that every thread's
// signal stack can hold the larger register state (Go's are 32 KiB).
var amxPermitted = sync.OnceValue(func() bool {
	const archReqXCompPerm, xfeatureXTileData = 0x1023, 18
	_, _, errno := unix.RawSyscall(unix.SYS_ARCH_PRCTL, archReqXCompPerm, xfeatureXTileData, 0)
	return errno == 0
})
