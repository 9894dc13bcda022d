package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm/persistency"
)

func TestPresetsValid(t *testing.T) {
	for _, name := range Presets() {
		c, err := Preset(name)
		require.NoError(t, err, name)
		require.NoError(t, c.Validate(), name)
		require.Equal(t, name, c.Name)
		for _, m := range c.Models() {
			b, err := New(c, m)
			require.NoError(t, err)
			require.Contains(t, b.Name(), name)
		}
	}
	_, err := Preset("nope")
	require.ErrorIs(t, err, ErrPreset)
}

func TestConfigValidateNamesField(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want string
	}{
		{"nvm.write_latency_cycles=0", "nvm.write_latency_cycles"},
		{"nvm.write_latency_cycles=-5", "nvm.write_latency_cycles"},
		{"nvm.write_gbps=0", "nvm.write_gbps"},
		{"pcie.gbps=-1", "pcie.gbps"},
		{"l1.size_bytes=0", "l1.size_bytes"},
		{"l1.line_bytes=100", "l1.line_bytes"},
		{"l2.line_bytes=64", "l2.line_bytes"},
		{"persist.window=300", "persist.window"},
		{"persist.buffer_entries=4", "persist.window"},
		{"gpu.max_threads_per_block=4096", "gpu.max_threads_per_block"},
		{"gpu.sms=0", "gpu.sms"},
		{"persist.point=battery", "persist.point"},
		{"nvm.bogus=1", "nvm.bogus"},
		{"bogus.x=1", "bogus"},
		{"nvm=1", "nvm"},
		{"nvm.write_latency_cycles=fast", "nvm.write_latency_cycles"},
		{"novalue", "novalue"},
		{"mem.sm_writes=65536", "mem.sm_writes"},
		{"mem.sm_reads=65536", "mem.sm_reads"},
		{"mem.sm_reads=0", "mem.sm_reads"},
		{"mem.sm_read_bytes=64", "mem.sm_read_bytes"}, // under a line: a line read could never fit
		{"mem.sm_read_bytes=262144", "mem.sm_read_bytes"},
		{"mem.sm_read_bytes=-4", "mem.sm_read_bytes"},
		{"gpu.lsu_line_cycles=-1", "gpu.lsu_line_cycles"},
		{"gpu.lsu_line_cycles=NaN", "gpu.lsu_line_cycles"},
		{"gpu.step_verbs=-1", "gpu.step_verbs"},
		{"gpu.step_verbs=65", "gpu.step_verbs"},
		{"mem.write_queue_entries=65536", "mem.write_queue_entries"},
		{"cpu.wpq_entries=0", "cpu.wpq_entries"},
		{"cpu.wpq_entries=65536", "cpu.wpq_entries"},
		{"pcie.write_buffer_bytes=64", "pcie.write_buffer_bytes"}, // under a line: a write could never enter
		{"pcie.write_buffer_bytes=2097153", "pcie.write_buffer_bytes"},
		{"pcie.write_buffer_bytes=-32", "pcie.write_buffer_bytes"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			c := PresetPMNear()
			before := c
			err := c.Set(tc.set)
			require.ErrorIs(t, err, ErrConfig)
			require.Contains(t, err.Error(), tc.want)
			require.Equal(t, before, c, "a failed Set leaves the config unchanged")
		})
	}
}

// The largest queues an occupancy calendar counts are accepted.
func TestConfigLargestQueues(t *testing.T) {
	c := PresetPMNear()
	require.NoError(t, c.Set("mem.sm_writes=65535", "mem.sm_reads=65535", "mem.write_queue_entries=65535", "mem.sm_read_bytes=262140", "pcie.write_buffer_bytes=2097120"))
}

func TestConfigSetAndLoad(t *testing.T) {
	c := PresetPMNear()
	require.NoError(t, c.Set("nvm.write_latency_cycles=500", "pcie.pm_far=true", "persist.window=8", "gpu.clock_mhz=1000.5"))
	require.Equal(t, 500, c.NVM.WriteLatencyCycles)
	require.True(t, c.PCIe.PMFar)
	require.Equal(t, 8, c.Persist.Window)
	require.Equal(t, 1000.5, c.GPU.ClockMHz)

	got, err := LoadConfig([]byte(`{"name":"x","nvm":{"write_latency_cycles":700},"persist":{"point":"eadr"}}`), PresetPMFar())
	require.NoError(t, err)
	require.Equal(t, "x", got.Name)
	require.Equal(t, 700, got.NVM.WriteLatencyCycles)
	require.Equal(t, 42.0, got.NVM.WriteGBps, "absent keys keep the base value")
	require.Equal(t, "eadr", got.Persist.Point)

	_, err = LoadConfig([]byte(`{"nvm":{"write_latency":700}}`), PresetPMFar())
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "write_latency")
	_, err = LoadConfig([]byte(`{"persist":{"window":1000}}`), PresetPMFar())
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "persist.window")

	keys := Keys()
	require.Contains(t, keys, "nvm.write_latency_cycles")
	require.Contains(t, keys, "persist.buffer_entries")
	for _, k := range keys {
		c := PresetPMNear()
		_, err := field(reflectValue(&c), k)
		require.NoError(t, err, k)
	}
}

func TestModelNames(t *testing.T) {
	for _, m := range Models() {
		got, err := ParseModel(m.String())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, err := ParseModel("tso")
	require.ErrorIs(t, err, ErrModel)
	_, err = ParseModel("x86")
	require.ErrorIs(t, err, ErrModel)
	_, err = New(PresetPMNear(), persistency.COSPlay)
	require.ErrorIs(t, err, ErrModel)
	_, err = New(PresetPMNear(), Model(99))
	require.ErrorIs(t, err, ErrModel)
	bad := PresetPMNear()
	bad.NVM.WriteGBps = 0
	_, err = New(bad, SBRP)
	require.ErrorIs(t, err, ErrConfig)
}

func TestResource(t *testing.T) {
	// 42 GB/s at 1365 MHz: 30.77 bytes per cycle; 1000 lines of 128 bytes
	// take at least 4160 cycles, and rounding up costs at most one cycle.
	r := newResource(42, 1365)
	var end uint64
	for range 1000 {
		end = r.transfer(0, 128)
	}
	min := uint64(128 * 1000 * 1365 / 42000)
	require.GreaterOrEqual(t, end, min)
	require.LessOrEqual(t, end, min+2)
	// An idle resource starts a transfer at once.
	require.Equal(t, uint64(10000+5), r.transfer(10000, 128))
}
