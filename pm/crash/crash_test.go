package crash_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/scope"
)

const empty = 0xFFFFFFFF

// reduction is a two-level persistent reduction after seed 001 Figure 3:
// inside a block, threads persist their values and release them at block
// scope to thread 0, which persists the block's partial sum and releases it
// at relScope (device scope is right: the final reducer is in another
// block); the final reducer acquires every partial, persists the total and
// then a done flag. Recovery resumes from the persisted partial sums and
// validates a persisted total against them.
type reduction struct {
	blocks, threads int
	relScope        pm.Scope
	in              []uint32
}

func newReduction(blocks, threads int, rel pm.Scope) *reduction {
	r := &reduction{blocks: blocks, threads: threads, relScope: rel}
	for i := range blocks * threads {
		r.in = append(r.in, uint32(3*i+1))
	}
	return r
}

func (r *reduction) Name() string { return fmt.Sprintf("reduction(%s)", r.relScope) }

func (r *reduction) Setup(m *pm.Machine) error {
	n := r.blocks * r.threads
	// vals: per-thread values; parts: per-block sums; res: total, done.
	for _, reg := range []struct {
		name string
		size int
	}{{"vals", 4 * n}, {"parts", 4 * r.blocks}, {"res", 8}} {
		rg, err := m.CreateRegion(reg.name, uint64(reg.size))
		if err != nil {
			return err
		}
		if err := m.CopyIn(rg.Base, fill(reg.size)); err != nil {
			return err
		}
	}
	return nil
}

func fill(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xFF
	}
	return b
}

func (r *reduction) regions(m *pm.Machine) (vals, parts, res pm.Addr, err error) {
	var rg [3]pm.Range
	for i, name := range []string{"vals", "parts", "res"} {
		if rg[i], err = m.OpenRegion(name); err != nil {
			return
		}
	}
	return rg[0].Base, rg[1].Base, rg[2].Base, nil
}

func (r *reduction) kernel(m *pm.Machine) (scope.Kernel, error) {
	vals, parts, res, err := r.regions(m)
	if err != nil {
		return nil, err
	}
	n := r.blocks * r.threads
	flags, err := m.Alloc(pm.DeviceMem, uint64(4*(n+r.blocks)))
	if err != nil {
		return nil, err
	}
	in := r.in
	return func(t *scope.Thread) {
		b, j := t.Block(), t.TID()
		// Resume: a persisted value or partial sum is not recomputed.
		v := vals.Add(uint64(4 * t.ID()))
		if t.Load32(v) == empty {
			t.Store32(v, in[t.ID()])
		}
		t.PRel(flags.Add(uint64(4*t.ID())), 1, pm.Block)
		if j != 0 {
			return
		}
		part := parts.Add(uint64(4 * b))
		if t.Load32(part) == empty {
			var sum uint32
			for k := range r.threads {
				for t.PAcq(flags.Add(uint64(4*(b*r.threads+k))), pm.Block) == 0 {
				}
				sum += t.Load32(vals.Add(uint64(4 * (b*r.threads + k))))
			}
			t.Store32(part, sum)
		}
		t.PRel(flags.Add(uint64(4*(n+b))), 1, r.relScope)
		if b != r.blocks-1 {
			return
		}
		if t.Load32(res.Add(4)) == 1 {
			return // done before the crash
		}
		var total uint32
		for k := range r.blocks {
			for t.PAcq(flags.Add(uint64(4*(n+k))), pm.Device) == 0 {
			}
			total += t.Load32(parts.Add(uint64(4 * k)))
		}
		t.Store32(res, total)
		t.OFence()
		t.Store32(res.Add(4), 1)
	}, nil
}

func (r *reduction) launch(m *pm.Machine) error {
	k, err := r.kernel(m)
	if err != nil {
		return err
	}
	_, err = scope.Launch(m, scope.Grid{Blocks: r.blocks, Threads: r.threads}, k)
	return err
}

func (r *reduction) Run(m *pm.Machine) error { return r.launch(m) }

var errInconsistent = errors.New("inconsistent durable state")

// Recover validates the durable state (a total is never durable without the
// partial sums it was computed from) and resumes the kernel.
func (r *reduction) Recover(m *pm.Machine) error {
	_, parts, res, err := r.regions(m)
	if err != nil {
		return err
	}
	mem := m.Memory()
	done, _ := mem.Load(res.Add(4), 4)
	if done == 1 {
		total, _ := mem.Load(res, 4)
		var sum uint64
		for b := range r.blocks {
			p, _ := mem.Load(parts.Add(uint64(4*b)), 4)
			if p == empty {
				return fmt.Errorf("%w: total %d durable but partial sum %d is not", errInconsistent, total, b)
			}
			sum += p
		}
		if uint32(sum) != uint32(total) {
			return fmt.Errorf("%w: total %d, partial sums add to %d", errInconsistent, total, sum)
		}
	}
	return r.launch(m)
}

func (r *reduction) Check(m *pm.Machine) error {
	_, _, res, err := r.regions(m)
	if err != nil {
		return err
	}
	var want uint32
	for _, v := range r.in {
		want += v
	}
	total, _ := m.Memory().Load(res, 4)
	done, _ := m.Memory().Load(res.Add(4), 4)
	if done != 1 || uint32(total) != want {
		return fmt.Errorf("total %d done %d, want %d", total, done, want)
	}
	return nil
}

var gpu = pm.GPULimits{SMs: 4, WarpSize: 4, MaxThreadsPerSM: 64, MaxBlocksPerSM: 4, MaxThreadsPerBlock: 64}

func TestCorrectReductionSurvives(t *testing.T) {
	for _, model := range []crash.Model{crash.SBRP, crash.Epoch, crash.Strict} {
		t.Run(model.String(), func(t *testing.T) {
			const seed = 7
			t.Logf("seed = %d", seed)
			rep, err := crash.Check(newReduction(3, 4, pm.Device), gpu, crash.Config{Model: model, States: 3000, Seed: seed})
			require.NoError(t, err)
			require.Empty(t, rep.Violations, "%v", rep.Violations)
			require.True(t, rep.Complete || rep.Checked == 3000, "checked %d", rep.Checked)
			require.Equal(t, 3*4+3+2, rep.Persists)
		})
	}
}

func TestTooNarrowReleaseCaught(t *testing.T) {
	const seed = 11
	t.Logf("seed = %d", seed)
	rep, err := crash.Check(newReduction(3, 4, pm.Block), gpu, crash.Config{Model: crash.SBRP, States: 3000, Seed: seed, Shrink: true})
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1)
	v := rep.Violations[0]
	require.ErrorIs(t, v.Err, errInconsistent)
	require.Len(t, v.Dropped, 1, "shrunk to one lost persist")
	t.Log(v.Explanation)
	require.Contains(t, v.Explanation, "PRel.block at crash_test.go:")
	require.Contains(t, v.Explanation, "is too narrow")
	require.Contains(t, v.Explanation, "need device scope")

	// Under Epoch the same kernel is safe: scopes do not matter there.
	rep, err = crash.Check(newReduction(3, 4, pm.Block), gpu, crash.Config{Model: crash.Epoch, States: 2000, Seed: seed})
	require.NoError(t, err)
	require.Empty(t, rep.Violations)
	// Under None nothing is ordered: even the correct kernel breaks.
	rep, err = crash.Check(newReduction(3, 4, pm.Device), gpu, crash.Config{Model: crash.None, States: 2000, Seed: seed})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Violations)
}

func TestMutationAndAdvice(t *testing.T) {
	w := newReduction(2, 4, pm.Device)
	rec, err := crash.Record(w, gpu)
	require.NoError(t, err)
	cfg := crash.Config{Model: crash.SBRP, States: 500, Seed: 3}
	res, err := rec.Mutate(w, cfg)
	require.NoError(t, err)
	killed := map[string]bool{}
	for _, r := range res {
		killed[r.Mutant.String()] = r.Killed
		t.Logf("%v killed=%v after %d states", r.Mutant, r.Killed, r.Checked)
	}
	var sawCross, sawOFence bool
	for m, k := range killed {
		switch {
		case strings.HasPrefix(m, "PRel") && strings.Contains(m, "device -> block"):
			sawCross = true
			require.True(t, k, "narrowing the cross-block release must be caught: %s", m)
		case strings.HasPrefix(m, "drop OFence"):
			sawOFence = true
			require.True(t, k, "dropping the OFence between total and done must be caught")
		}
	}
	require.True(t, sawCross && sawOFence)

	adv, err := rec.Advise(w, cfg)
	require.NoError(t, err)
	for _, a := range adv {
		t.Logf("%s %s at %s: %s -> %s", a.Kind, a.Current, a.Site, a.Current, a.Narrowest)
		if a.Kind == pm.OpPRel && a.Current == pm.Device {
			require.Equal(t, pm.Device, a.Narrowest, "blocks communicate: keep device scope")
		}
		if a.Kind == pm.OpPRel && a.Current == pm.Block {
			require.Less(t, a.Narrowest, pm.Device)
		}
	}
}

func TestStatesAreValid(t *testing.T) {
	w := newReduction(2, 4, pm.Device)
	rec, err := crash.Record(w, gpu)
	require.NoError(t, err)
	for _, model := range crash.Models() {
		g := crash.Build(rec.Events, model)
		n := 0
		complete := g.Enumerate(2000, func(s crash.State) bool {
			require.NoError(t, g.Valid(s), "%v", model)
			n++
			return true
		})
		t.Logf("%v: %d persists, %d states, complete=%v", model, len(g.Persists), n, complete)
		for k := 0; k <= len(g.Persists); k++ {
			require.NoError(t, g.Valid(g.Prefix(k)))
		}
		if model == crash.Strict {
			require.True(t, complete)
			require.Equal(t, len(g.Persists)+1, n, "under Strict the states are the prefixes")
		}
	}
}
