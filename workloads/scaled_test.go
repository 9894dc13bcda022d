package workloads

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/scope"
)

// NewScaled multiplies the blocks and the input, keeps every thread's work,
// and at factor 1 is the registered size.
func TestNewScaledShapes(t *testing.T) {
	for _, tc := range []struct {
		factor float64
		blocks int
		ints   int
		kvs    int
	}{
		{0.25, 15, 65536, 4},
		{1, 60, 262144, 16},
		{4, 240, 1 << 20, 64},
	} {
		w, err := NewScaled("reduction", Paper, tc.factor)
		require.NoError(t, err)
		r := w.(*Reduction)
		require.Equal(t, scope.Grid{Blocks: tc.blocks, Threads: 512}, r.Grid, "x%v", tc.factor)
		require.Equal(t, tc.ints, r.N, "x%v", tc.factor)
		require.Equal(t, 16, r.Launches, "x%v", tc.factor)
		require.Equal(t, "reduction", r.Name())

		w, err = NewScaled("gpkvs-sbrp", Paper, tc.factor)
		require.NoError(t, err)
		k := w.(*KVSInsert)
		want := kvsInsertShape(Paper)
		want.Blocks = tc.kvs
		require.Equal(t, want, k.Shape, "x%v", tc.factor)
		require.Len(t, k.batch, tc.kvs*512*32/4, "x%v: inserts", tc.factor)
	}
	// Factor 1 is New, variants keep their scopes.
	for _, name := range []string{"reduction", "reduction-wide", "reduction-narrow", "gpkvs-sbrp", "gpkvs-sbrp-no-ofence"} {
		require.True(t, Scalable(name), name)
		for _, s := range []Size{Tiny, Quick, Paper} {
			want, err := New(name, s)
			require.NoError(t, err)
			got, err := NewScaled(name, s, 1)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s at size %d", name, s)
		}
	}
}

func TestNewScaledErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   Size
		factor float64
	}{
		{"reduction", Paper, 1.0 / 7}, // not a whole number of blocks
		{"reduction", Paper, 16},      // more blocks than threads per block
		{"reduction", Paper, 0},       // not positive
		{"gpkvs-sbrp", Tiny, 0.5},     // under one block
		{"gpkvs-sbrp", Paper, 3},      // 48 blocks do not split the buckets
		{"srad", Quick, 2},            // does not scale
	} {
		_, err := NewScaled(tc.name, tc.size, tc.factor)
		require.ErrorIs(t, err, ErrConfig, "%s x%v", tc.name, tc.factor)
	}
	_, err := NewScaled("nope", Quick, 1)
	require.ErrorIs(t, err, ErrUnknown)
	require.False(t, Scalable("srad"))
	require.False(t, Scalable("nope"))
}

// A scaled workload runs and passes its check.
func TestNewScaledRuns(t *testing.T) {
	for _, name := range []string{"reduction", "gpkvs-sbrp"} {
		for _, f := range []float64{0.25, 2} {
			w, err := NewScaled(name, Quick, f)
			require.NoError(t, err)
			m := newShapeMachine(t, "sbrp")
			require.NoError(t, w.Setup(m))
			require.NoError(t, w.Run(m), "%s x%v", name, f)
			require.NoError(t, w.Check(m), "%s x%v", name, f)
		}
	}
}
