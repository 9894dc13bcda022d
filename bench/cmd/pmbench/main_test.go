package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPmbenchCSV(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-exp", "engine", "-quick", "-format", "csv"}, &out, &errb))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "experiment,workload,config,metric,value", lines[0])
	var sawRate bool
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		require.Len(t, f, 5, l)
		require.Equal(t, "engine", f[0])
		if f[1] == "vector-add" && f[3] == "verbs_per_s" {
			sawRate = true
		}
		if f[1] == "vector-add" && f[3] == "threads" {
			require.Equal(t, "1048576", f[4], "the engine experiment launches at least 1M threads")
		}
	}
	require.True(t, sawRate)
}

func TestPmbenchFlags(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-list"}, &out, &errb))
	require.Contains(t, out.String(), "engine")
	require.Error(t, run([]string{"-exp", "nope"}, &out, &errb))
	require.Error(t, run([]string{"-format", "xml"}, &out, &errb))
	require.Error(t, run([]string{"stray"}, &out, &errb))
}
