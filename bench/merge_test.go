package bench_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

// Merge puts the shards' rows back in the unsharded order and recomputes
// the aggregates from their exact values; an experiment whose shards
// differ and that has no rule to join them is an error.
func TestMerge(t *testing.T) {
	const h = "experiment,workload,config,metric,value,size,shard,value_exact\n"
	s0 := h + "sbrp-fig9,gpKVS,sbrp-far-eadr,speedup,2,quick,0/2,2\n" +
		"sbrp-fig9,SRAD,sbrp-far-eadr,speedup,1.33333,quick,0/2,1.3333333333333333\n"
	s1 := h + "sbrp-fig9,HM,sbrp-far-eadr,speedup,3,quick,1/2,3\n"
	got, err := bench.Merge(strings.NewReader(s1), strings.NewReader(s0))
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, bench.Format{Size: "quick"}, got[0].Format)
	var b strings.Builder
	require.NoError(t, bench.WriteCSV(&b, got[0].Rows, got[0].Format))
	require.Equal(t, "sbrp-fig9,gpKVS,sbrp-far-eadr,speedup,2,quick\n"+
		"sbrp-fig9,HM,sbrp-far-eadr,speedup,3,quick\n"+
		"sbrp-fig9,SRAD,sbrp-far-eadr,speedup,1.33333,quick\n"+
		"sbrp-fig9,geomean,sbrp-far-eadr,speedup,2,quick\n", b.String())

	g0 := h + "cosplay-fig10,a,x,m,1,quick,0/2,1\n"
	g1 := h + "cosplay-fig10,b,x,m,1,quick,1/2,1\n"
	_, err = bench.Merge(strings.NewReader(g0), strings.NewReader(g1))
	require.ErrorIs(t, err, bench.ErrMerge)
	require.ErrorContains(t, err, "no rule to join them")
	// Every shard ran the whole experiment: its rows, once.
	got, err = bench.Merge(strings.NewReader(g0), strings.NewReader(strings.ReplaceAll(g0, "0/2", "1/2")))
	require.NoError(t, err)
	require.Len(t, got[0].Rows, 1)
}

// A shard without rows of an experiment says so in one row, and Merge
// counts it as present.
func TestMergeEmptyShard(t *testing.T) {
	f := bench.Format{Size: "quick", Shard: "1/2", Header: true}
	var b strings.Builder
	require.NoError(t, bench.WriteShardCSV(&b, "gope-fig7", nil, f))
	require.Equal(t, "experiment,workload,config,metric,value,size,shard,value_exact\ngope-fig7,,,,,quick,1/2,\n", b.String())
	s0 := "experiment,workload,config,metric,value,size,shard,value_exact\ngope-fig7,13.17MB,wg,time_norm,1.5,quick,0/2,1.5\n"
	got, err := bench.Merge(strings.NewReader(s0), strings.NewReader(b.String()))
	require.NoError(t, err)
	require.Equal(t, []bench.Row{{"gope-fig7", "13.17MB", "wg", "time_norm", 1.5}}, got[0].Rows)
}
