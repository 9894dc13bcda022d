package hwmodel_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/internal/keydoc"
)

// A key is documented once, by its field's doc comment: keydocs_gen.go is
// what go generate derives from the comments, so a comment changed without
// go generate ./hwmodel fails here.
func TestKeyDocsGenerated(t *testing.T) {
	want, err := keydoc.Generate(os.DirFS("."), "hwmodel", "Config", "keyMeaning")
	require.NoError(t, err)
	got, err := os.ReadFile("keydocs_gen.go")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "hwmodel/keydocs_gen.go is stale: run go generate ./hwmodel")
	keys, err := keydoc.Keys(os.DirFS("."), "Config")
	require.NoError(t, err)
	require.Len(t, keys, len(hwmodel.Keys()))
	for i, k := range keys {
		require.Equal(t, hwmodel.Keys()[i], k.Key)
	}
}

// Every key Set takes is documented with a unit and a source, and every
// preset's value of it reads back through Set unchanged.
func TestKeyInfos(t *testing.T) {
	infos := hwmodel.KeyInfos()
	require.Len(t, infos, len(hwmodel.Keys()))
	for i, in := range infos {
		require.Equal(t, hwmodel.Keys()[i], in.Key)
		require.NotEqual(t, "?", in.Unit, in.Key)
		require.NotContains(t, in.Doc, "undocumented", "%s: give its field a doc comment and run go generate ./hwmodel", in.Key)
		require.NotEmpty(t, in.Source, "%s has no source in hwmodel/keys.go (keySources)", in.Key)
	}
	for _, name := range hwmodel.Presets() {
		c, err := hwmodel.Preset(name)
		require.NoError(t, err)
		for _, k := range hwmodel.Keys() {
			v, err := c.Value(k)
			require.NoError(t, err, "%s %s", name, k)
			c2 := c
			require.NoError(t, c2.Set(k+"="+v), "%s %s=%s", name, k, v)
			require.Equal(t, c, c2, "%s %s=%s", name, k, v)
		}
	}
}

// Every key whose volta value differs from the SBRP machine's says where
// volta's comes from; the memory bandwidths come from the re-study's
// GPGPU-Sim configuration (its NVM is the QV100's HBM model with NVM
// latencies: 32 channels × 16 bytes × 2 × 850 MHz).
func TestVoltaKeySources(t *testing.T) {
	sbrp, volta := hwmodel.PresetPMNear(), hwmodel.PresetVolta()
	for _, in := range hwmodel.KeyInfos() {
		a, err := sbrp.Value(in.Key)
		require.NoError(t, err)
		b, err := volta.Value(in.Key)
		require.NoError(t, err)
		if a != b && in.Key != "name" {
			require.Contains(t, in.Source, "volta", "%s: volta has %s, the SBRP machine %s", in.Key, b, a)
		}
	}
	for _, k := range []string{"nvm.read_gbps", "nvm.write_gbps", "dram.read_gbps", "dram.write_gbps"} {
		v, err := volta.Value(k)
		require.NoError(t, err)
		require.Equal(t, "870.4", v, k)
	}
	for _, in := range hwmodel.KeyInfos() {
		if in.Key == "nvm.read_gbps" || in.Key == "nvm.write_gbps" {
			require.Contains(t, in.Source, "re-study's GPGPU-Sim configuration", in.Key)
			require.Contains(t, in.Source, "870.4 GB/s", in.Key)
		}
	}
}

// An unknown key's error says which keys there are.
func TestUnknownKeyHint(t *testing.T) {
	c := hwmodel.PresetPMNear()
	for _, tc := range []struct{ set, want string }{
		{"nvm.write_latency=5", "keys of nvm: nvm.read_latency_cycles, nvm.write_latency_cycles, nvm.read_gbps, nvm.write_gbps, nvm.shared_bus; every key: pmbench keys"},
		{"nope=1", "groups: name, gpu, l1, l2, dram, nvm, mem, pcie, persist, writeback, cpu; every key: pmbench keys"},
		{"nvm=1", "names a group, not a parameter (keys of nvm: "},
	} {
		err := c.Set(tc.set)
		require.ErrorIs(t, err, hwmodel.ErrConfig, tc.set)
		require.ErrorContains(t, err, tc.want, tc.set)
	}
	_, err := c.Value("nope")
	require.ErrorIs(t, err, hwmodel.ErrConfig)
}
