package bench

import (
	"context"
	"os"
	"testing"
)

func TestZZPart(t *testing.T) {
	meas, _ := h100Table()
	o := Options{}
	cfg, _ := o.config("h100", nil)
	h := &hv{ctx: context.Background(), o: o, meas: meas, clk: cfg.GPU.ClockMHz}
	parts := map[string]func() error{"read": h.readPath, "probes": h.probes, "mixed": h.mixed, "shapes": h.loadShapes, "depth": h.depth, "bystander": h.bystander, "offered": h.offered, "log": h.log, "conc": h.conc, "bandwidth": h.bandwidth, "pending": h.pending, "lat": h.lat, "loads": h.loads, "atoms": h.atoms, "conv": h.convParts, "rewrite": h.rewrite}
	if err := parts[os.Getenv("ZZ")](); err != nil {
		t.Fatal(err)
	}
}
