//go:build unix

package bench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A side of load-vs-pebble loads its keys, closes, and reports its time,
// its process's peak RSS and its directory's bytes; a bad spec is an
// error that names it.
func TestLoadChild(t *testing.T) {
	for _, s := range loadSides {
		t.Run(s.name, func(t *testing.T) {
			r, err := loadChild(fmt.Sprintf("%s log 2500 %s", s.name, t.TempDir()))
			require.NoError(t, err)
			require.Positive(t, r.Seconds)
			require.Positive(t, r.PeakBytes)
			require.Positive(t, r.DiskBytes)
		})
	}
	for spec, want := range map[string]string{
		"":                          "bad " + envLoadChild,
		"btree-native log 10":       "bad " + envLoadChild,
		"bbolt log 0 /tmp":          "bad " + envLoadChild,
		"bbolt log x /tmp":          "bad " + envLoadChild,
		"btree-native fast 10 /tmp": "bad " + envLoadChild,
		"nope log 10 /tmp":          `no side "nope"`,
	} {
		_, err := loadChild(spec)
		require.ErrorContains(t, err, want, "spec %q", spec)
	}
}
