package bench_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

// WriteTable prints one table per set of metrics that rows share (no
// column of empty cells) and splits a table wider than 100 characters.
func TestWriteTableGroups(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   []bench.Row
		tables int
	}{
		{"one set", []bench.Row{{"e", "a", "x", "m1", 1}, {"e", "b", "x", "m1", 2}}, 1},
		{"two sets", []bench.Row{{"e", "a", "x", "m1", 1}, {"e", "b", "x", "m2", 2}, {"e", "c", "x", "m1", 3}}, 2},
		{"too wide", func() []bench.Row {
			var rows []bench.Row
			for i := range 12 {
				rows = append(rows, bench.Row{Experiment: "e", Workload: "w", Config: "c", Metric: fmt.Sprintf("a_rather_long_metric_%d", i), Value: 1e6})
			}
			return rows
		}(), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, bench.WriteTable(&b, tc.rows, bench.Format{}))
			tables := strings.Split(strings.TrimSpace(b.String()), "\n\n")
			require.Len(t, tables, tc.tables, b.String())
			for _, tab := range tables {
				for _, line := range strings.Split(tab, "\n") {
					require.LessOrEqual(t, len(line), 100, "%q", line)
					require.NotContains(t, line, " - ", "a table of rows that share metrics has no empty cell")
				}
			}
		})
	}
}
