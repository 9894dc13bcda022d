package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadsQueueBehindWrites holds mem.reads_queue to its mechanism: a PM
// read that reaches a channel whose queue is full of writes waits for an
// entry (behind writes that still need the bus), and without the key it
// holds no entry. Neither overfills the queue. (With nvm.shared_bus a read
// also waits for the writes booked on the bus before it.)
func TestReadsQueueBehindWrites(t *testing.T) {
	for _, c := range []struct {
		name   string
		queued bool
	}{{"shared queue", true}, {"reads hold no entry", false}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := PresetPMNear()
			cfg.Mem.ReadsQueue = c.queued
			cfg.NVM.SharedBus = false // reads on their own bus: only the queue can hold them back
			m := newMemSystem(cfg, 7)
			m.audit = true
			const n = 128
			var st Stats
			// Fill channel 0's PM queue: line 0 maps to bank 0, channel 0.
			var lastIn uint64
			for range cfg.Mem.WriteQueueEntries {
				in, _ := m.auditWrite(&m.nvm[0], 0, n)
				lastIn = max(lastIn, in)
			}
			require.Zero(t, lastIn, "64 writes enter an empty 64-entry queue at once")
			back := m.readLine(0, n, 0, true, &st)
			ch := &m.nvm[0]
			svc := (n*ch.wr.perByte + (1<<fracBits - 1)) >> fracBits
			firstOut := svc + ch.wrLat // the first write leaves its entry when written
			if c.queued {
				require.GreaterOrEqual(t, back, firstOut+ch.rdLat, "the read waits for the first entry to free")
			} else {
				require.Less(t, back, firstOut, "without the key the read waits for nothing")
			}
			require.LessOrEqual(t, m.over, 0, "the queue never holds more than its entries")
			t.Logf("read back at %d (first write frees its entry at %d)", back, firstOut)
		})
	}
}
