package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPmcheck(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr error
		out     []string
	}{
		{[]string{"-workload", "reduction", "-states", "2000"}, nil, []string{"0 violations"}},
		{[]string{"-workload", "reduction-narrow", "-states", "2000", "-seed", "5"}, errViolations,
			[]string{"1 violations", "PRel.block at reduction.go:", "too narrow", "replay: pmcheck -workload reduction-narrow -size tiny -model sbrp -strategy mixed -states 2000 -seed 5"}},
		{[]string{"-workload", "reduction", "-model", "epoch", "-strategy", "random", "-states", "300"}, nil, []string{"checked 300 crash states, 0 violations"}},
		{[]string{"-workload", "reduction", "-mutate", "-states", "300"}, nil, []string{"killed   PRel at reduction.go:", "device -> block"}},
		{[]string{"-workload", "reduction", "-advise", "-states", "300"}, nil, []string{"device -> device keep", "block  -> block  keep"}},
		{[]string{"-list"}, nil, []string{"reduction-narrow"}},
	} {
		var out, errb bytes.Buffer
		err := run(tc.args, &out, &errb)
		if tc.wantErr != nil {
			require.ErrorIs(t, err, tc.wantErr, "%v", tc.args)
		} else {
			require.NoError(t, err, "%v: %s", tc.args, errb.String())
		}
		for _, s := range tc.out {
			require.Contains(t, out.String(), s, "%v", tc.args)
		}
	}
	for _, bad := range [][]string{{}, {"-workload", "nope"}, {"-workload", "reduction", "-model", "tso"}, {"-workload", "reduction", "-strategy", "x"}} {
		var out, errb bytes.Buffer
		require.Error(t, run(bad, &out, &errb), "%v", bad)
	}
}

func TestPmcheckTimed(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-workload", "reduction", "-timed", "pm-near", "-model", "epoch", "-states", "100"}, &out, &errb))
	require.Contains(t, out.String(), "reduction on hwmodel pm-near/epoch, seed 1: checked")
	require.Error(t, run([]string{"-workload", "reduction", "-timed", "pm-mars"}, &out, &errb))
}
