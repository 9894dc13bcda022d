//go:build unix

package native_test

import (
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm/native"
)

// NthFault fails exactly the N-th matching operation, once, and counts
// only the operations of its kind on the files it matches, also when
// several goroutines call it.
func TestNthFault(t *testing.T) {
	isLog := func(p string) bool { return strings.HasPrefix(filepath.Base(p), "LOG") }
	for _, tc := range []struct {
		name  string
		match func(string) bool
		n     int
		ops   []native.FSOp
		paths []string
		fails int // the index in ops of the failing call, -1 for none
	}{
		{"third write", nil, 3, []native.FSOp{native.FSWrite, native.FSSync, native.FSWrite, native.FSWrite, native.FSWrite}, []string{"a", "a", "b", "c", "d"}, 3},
		{"log only", isLog, 2, []native.FSOp{native.FSSync, native.FSSync, native.FSSync}, []string{"d/LOG", "d/x.pmr", "d/LOG.old"}, 2},
		{"beyond the calls", nil, 9, []native.FSOp{native.FSSync, native.FSSync}, []string{"a", "b"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &native.NthFault{Op: tc.ops[len(tc.ops)-1], Match: tc.match, N: tc.n, Err: syscall.EIO}
			for i, op := range tc.ops {
				err := f.MaybeError(op, tc.paths[i])
				if i == tc.fails {
					require.ErrorIs(t, err, syscall.EIO, "call %d", i)
				} else {
					require.NoError(t, err, "call %d", i)
				}
			}
			require.Equal(t, tc.fails >= 0, f.Hit())
			// Once hit, it never fails again.
			require.NoError(t, f.MaybeError(f.Op, "LOG"))
		})
	}
	f := &native.NthFault{Op: native.FSWrite, N: 50, Err: syscall.ENOSPC}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 4 {
		wg.Go(func() {
			for range 25 {
				errs <- f.MaybeError(native.FSWrite, "x")
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			n++
		}
	}
	require.Equal(t, 1, n, "failed calls of 100 concurrent")
}
