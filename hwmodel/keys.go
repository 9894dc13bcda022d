package hwmodel

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// KeyInfo documents one key of Config.Set: what it sets (its field's doc
// comment), in which unit, and where the SBRP machine's value (sbrpBase,
// the pm-near, pm-far and pm-far-eadr presets) comes from, and the volta
// preset's where it differs. Every key of Keys has one (a test keeps it so).
type KeyInfo struct {
	Key    string // dotted JSON path, as Set takes it
	Unit   string // "cycles", "GB/s", "bytes", "count", "MHz", "bool", "name"
	Doc    string // what the parameter is
	Source string // where the SBRP machine's value comes from (and volta's, where it differs)
	// Paths names the timing paths the key lies on: "every GPU model",
	// one model's policy, the write-back models, CPU runs, or "none" for a
	// label. A key on no path of a model changes nothing under it.
	Paths string
}

// keyPaths returns the timing paths key lies on (KeyInfo.Paths).
func keyPaths(key string) string {
	switch {
	case key == "name":
		return "none (a label)"
	case strings.HasPrefix(key, "cpu."):
		return "CPU runs (every CPU configuration)"
	case strings.HasPrefix(key, "writeback."):
		return "writeback-adr, writeback-pct"
	case key == "persist.window" || key == "persist.buffer_entries":
		return "sbrp"
	case strings.HasPrefix(key, "persist.nvw_fifo"):
		return "scoped-barrier"
	case strings.HasPrefix(key, "persist.epoch_"):
		return "epoch, gpm"
	case strings.HasPrefix(key, "pcie.") && key != "pcie.pm_far", key == "mem.sm_far_gbps":
		return "every GPU model, with pcie.pm_far"
	}
	return "every GPU model"
}

// keySources says, per key, where the SBRP machine's value comes from (and
// volta's and gope's, where they differ); cpuKeySources has the CPU keys'.
// What a key is, is its field's doc comment (keyMeaning, generated).
var keySources = map[string]string{
	"name":                              "the preset's name",
	"gpu.clock_mhz":                     "SBRP Table 1 (1365 MHz); volta: the re-study's GPGPU-Sim configuration (1132 MHz, -gpgpu_clock_domains)",
	"gpu.sms":                           "SBRP Table 1 (30); volta: the re-study's Table I (80)",
	"gpu.warp_size":                     "CUDA (32)",
	"gpu.lsu_line_cycles":               "0 (lines a cycle apart within an instruction) on the simulated machines: not among the artifacts' settings; h100: measured, one warp's step of 4-byte loads grows by 2.1-2.3 cycles a line from 8 to 128 lines, and with two warps a scheduler by 2.2-2.3 (bench/h100/measured9.csv, lshape sector and line, 1 and 8 warps)",
	"gpu.schedulers":                    "assumed: GPGPU-Sim's Pascal/Volta configs (4); not in SBRP Table 1",
	"gpu.max_threads_per_sm":            "CUDA limit (2048); not in SBRP Table 1",
	"gpu.max_blocks_per_sm":             "CUDA limit (32); not in SBRP Table 1",
	"gpu.max_threads_per_block":         "SBRP Table 1 (1024)",
	"gpu.launch_latency_cycles":         "SBRP/GPM artifacts' and the re-study's gpgpusim.config (-gpgpu_kernel_launch_latency 5000); gope: 0, not in the scoped persist barrier paper",
	"gpu.smem_latency_cycles":           "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_smem_latency 20); gope: the SBRP artifact's, not in Table 2; h100: measured, one thread's dependent shared-memory loads (bench/h100/measured7.csv, smem chase: 29.1)",
	"gpu.smem_banks":                    "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_shmem_num_banks 32); gope: GCN's LDS (32 banks), not in Table 2",
	"gpu.smem_bytes":                    "SBRP artifact's gpgpusim.config (-gpgpu_shmem_size 65536); volta: the re-study's Table I (96 KB); gope: GCN's 64 KB LDS, not in Table 2",
	"gpu.fence_block_cycles":            "0 on the simulated machines; h100: measured, __threadfence_block after a store over a plain store (shared/calibration/h100, lat host/lanes32: 31.6 - 21.6)",
	"gpu.fence_device_cycles":           "0 on the simulated machines (their fences cost an L2 round trip and at least gpu.fence_latency_cycles); h100: measured, __threadfence after a store over a plain store (lat host/lanes32: 725.6 - 21.6)",
	"gpu.fence_system_cycles":           "0 on the simulated machines (SBRP artifact: GPM adds a device fence after every persistency verb, at least gpu.fence_latency_cycles); h100: measured, __threadfence_system with nothing pending (lat host/lanes32 system-nostore: 1,279.6)",
	"gpu.fence_latency_cycles":          "SBRP machines: the SBRP artifact's GPGPU-Sim (-ptx_opcode_latency_fence, 200 by default and set by none of its configurations: cuda-sim.cc gives a fence of gpu or sys scope that latency unless it is a persistent op under -pm_model 5 (SBRP), and shader.cc holds the warp until the later of it and the warp's acks); 0 on volta (the re-study's GPGPU-Sim has no fence latency), gope (gem5) and h100 (its measured fence costs are gpu.fence_*_cycles)",
	"gpu.fence_waits_all":               "off on the simulated machines (GPGPU-Sim's membar waits for its warp's own writes); h100: on, measured (bench/h100/measured3.csv, bystander and depth: one SM's fence alone takes 1,278 cycles, and 105,820 while 131 other SMs stream to host memory, __threadfence as long)",
	"gpu.whole_steps":                   "off on every preset: a simulation granularity, not among the artifacts' settings; on, a warp's step is timed whole, out of clock order: gope's 40 wavefronts then kept lines in their 16 KB L1 that the other wavefronts' reads would have evicted (TestStepKeepsNoFalseLocality: 1.0 misses a line where clock order gives 2.0), and h100's fences waited 2.9 times Little's law behind its streams at 8 verbs a step (TestWriteBufferInFrontOfTheLink)",
	"gpu.step_verbs":                    "0 (Batch, 8 verbs) on every preset: a simulation granularity, not among the artifacts' settings; with instructions timed in clock order it sets only how far a warp runs ahead of the others in what it does, such as how many times a lane spins on a flag in a step",
	"gpu.serial_loads":                  "off: GPGPU-Sim's scoreboard (SBRP artifact, re-study) overlaps a warp's independent loads",
	"l1.size_bytes":                     "SBRP Table 1 (64 KB); volta: the re-study's Table I (32 KB)",
	"l1.line_bytes":                     "SBRP artifact (128)",
	"l1.assoc":                          "assumed (4); not in SBRP Table 1",
	"l1.latency_cycles":                 "SBRP artifact (20); h100: measured, dependent ld.ca loads over 8 KB (bench/h100/measured3.csv: 39.6)",
	"l2.size_bytes":                     "SBRP Table 1 (3 MB); volta: the re-study's Table I (6 MB)",
	"l2.line_bytes":                     "SBRP artifact (128)",
	"l2.assoc":                          "assumed (16); not in SBRP Table 1; volta: the re-study's GPGPU-Sim configuration (24: -gpgpu_cache:dl2 S:32:128:24 per L2 bank)",
	"l2.latency_cycles":                 "SBRP artifact (160); h100: measured, dependent ld.cg loads over 1 MB after a warm lap (bench/h100/measured3.csv: 290.3)",
	"dram.read_latency_cycles":          "SBRP artifact (100); volta: the re-study's Table I (150); h100: measured, dependent loads over 256 MB (660.7) less the L2 (bench/h100/measured3.csv)",
	"dram.write_latency_cycles":         "SBRP artifact (100); volta: the re-study's Table I (150)",
	"dram.read_gbps":                    "SBRP Table 1 (336 GB/s GDDR); volta: the re-study's GPGPU-Sim HBM (32 channels × 16 B × 2 × 850 MHz = 870.4 GB/s)",
	"dram.write_gbps":                   "SBRP Table 1 (336 GB/s GDDR); volta: the re-study's GPGPU-Sim HBM (32 channels × 16 B × 2 × 850 MHz = 870.4 GB/s)",
	"nvm.read_latency_cycles":           "SBRP artifact: device memory + 300 (400); pm-far-eadr: the artifact's sbrp_far_eadr, whose -pm_latency (600 for sbrp_far's 900) every PM request crosses, reads included (100); volta: the re-study's Table I (200 read, 600 write); h100: measured, dependent loads over 512 MB of pinned host memory (2,440) less the L2 and pcie.latency_cycles (bench/h100/measured3.csv)",
	"nvm.write_latency_cycles":          "SBRP artifact: device memory + 300 (400); pm-far-eadr: the artifact's sbrp_far_eadr, whose -pm_latency (600 for sbrp_far's 900) every PM request crosses (100); volta: the re-study's Table I (200 read, 600 write)",
	"nvm.read_gbps":                     "SBRP Table 1 (84 GB/s, 1/4 of GDDR in the artifact); gope: device memory's (the scoped persist barrier paper's Table 2 sets NVRAM apart by latency alone); volta: the re-study's GPGPU-Sim configuration, whose NVM is its HBM model with NVM latencies (870.4 GB/s, shared by reads and writes there)",
	"nvm.write_gbps":                    "SBRP Table 1 (42 GB/s, 1/8 of GDDR in the artifact); gope: device memory's (the scoped persist barrier paper's Table 2 sets NVRAM apart by latency alone); volta: the re-study's GPGPU-Sim configuration, whose NVM is its HBM model with NVM latencies (870.4 GB/s, shared by reads and writes there)",
	"nvm.shared_bus":                    "on: the SBRP artifact's PM is a GDDR channel model whose bursts are scaled down per direction (dram.cc: BL/4 read, BL/8 write, -pm_bw_scale_read/-write), and a channel's data bus carries both; volta: the re-study's GPGPU-Sim HBM channel, whose data bus carries both",
	"dram.shared_bus":                   "off: SBRP Table 1 gives one GDDR bandwidth, taken as each direction's",
	"pcie.pm_far":                       "SBRP PM-far (pm-far, pm-far-eadr presets)",
	"pcie.latency_cycles":               "SBRP Table 1 (300 ns = 410 cycles); pm-far: the artifact's 600; h100: half the measured system fence (1,280 cycles to the host and back) less the L2's measured 290 (bench/h100/measured3.csv)",
	"pcie.gbps":                         "SBRP Table 1 (28 GB/s)",
	"pcie.uncached_reads":               "off: GPGPU-Sim caches PM-far lines like any other (SBRP artifact); h100: on, measured (bench/h100/measured3.csv, load host-l2: 2,390 cycles a load after a warm lap over 1 MB, as cold)",
	"pcie.tlp_bytes":                    "0: SBRP Table 1's 28 GB/s is a data rate; h100: the PCIe 3.0+ memory-write TLP (4-byte STP token, 16-byte header for a 64-bit address, 4-byte LCRC: 24)",
	"pcie.write_buffer_bytes":           "0 (no buffer: a write holds its SM's slot until its ack) on the simulated machines: the artifacts' configurations have no such buffer; h100: measured, a system fence beside two SMs streaming to host memory waits for 752 KB at the link's rate, 670 KB beyond the two SMs' 256 slots each (bench/h100/measured5-h100.csv, depth S2; measured7.csv, rprobe S2: 731 KB)",
	"pcie.full_duplex":                  "off on the SBRP machines: the artifact's far PM is one GDDR channel model scaled to 28 GB/s both ways (dram.cc, -pm_bw_scale_read/-write 12), so reads and writes share it; h100: on (a real PCIe link is full duplex); off on volta and gope (PM is near: no link)",
	"persist.point":                     "SBRP artifact (adr); pm-far-eadr: SBRP §7.3 (eadr)",
	"persist.eadr_latency_cycles":       "SBRP artifact: PM-far eADR +600 over device memory (100); volta: the DRAM latency of the re-study's Table I (150; the re-study has no eADR)",
	"persist.buffer_entries":            "SBRP artifact (256; Fig. 10a sweeps 32-256)",
	"persist.window":                    "SBRP Table 1 (6; Fig. 10c sweeps 2-12)",
	"persist.ack_at_queue":              "on: SBRP artifact (every PM write is acked when the partition issues it into the PM's latency pipeline, l2cache.cc dram_cycle, -pm_enable_adr 1 in every configuration); h100: off (the host acknowledges); volta: ADR puts the WPQ in the persistence domain, and the re-study's GPGPU-Sim spends -dram_write_latency inside its WPQ (a PCommit under PCT waits for that drain)",
	"persist.epoch_own_acks":            "on: SBRP artifact's simulator (a warp waits for its outstanding persists); off on volta (not the SBRP artifact's simulator)",
	"persist.epoch_write_through":       "off on the SBRP machines: the artifact's epoch and GPM configurations run -pm_model 3, whose L1 is write-back for PM (-gpgpu_cache:dl1 ...L:B) and flushes the L1's PM lines at every persistent op (shader.cc perform_ordering_ops), as the SBRP paper describes Epoch; h100: on (NVIDIA's L1 writes global stores through); off on volta (the re-study's models have their own write-back path)",
	"persist.sector_bytes":              "SBRP machines and dram: the SBRP artifact's sectored L1 (GPGPU-Sim sector cache, 32-byte sectors); volta: GPGPU-Sim 4.0's QV100 sector caches (32, as writeback.sector_bytes, which the re-study's write-back models read); gope: 0, gem5's caches are not sectored",
	"persist.nvw_fifo_l1":               "scoped persist barrier paper Table 2 (16)",
	"persist.nvw_fifo_l2":               "scoped persist barrier paper Table 2 (64)",
	"writeback.channels":                "off on the SBRP machines; volta: the re-study's Table I (32 channels)",
	"writeback.l2_banks_per_channel":    "off on the SBRP machines; volta: the re-study's Table I (2 per channel)",
	"writeback.l2_tag_checks_per_cycle": "off on the SBRP machines; volta: the re-study's GPGPU-Sim (24: data_cache::nvm_wb_timing examines up to the L2's associativity per cycle), not in the paper",
	"writeback.sector_bytes":            "off on the SBRP machines; volta: GPGPU-Sim 4.0's QV100 configuration (32)",
	"mem.inject_bytes_per_cycle":        "SBRP artifact's and the re-study's gpgpusim.config (-icnt_flit_size 40: one flit, a 32-byte sector and its header, per cycle per node); the H100 measurement (shared/calibration/h100: one SM streams 53-63 GB/s to device memory, about 32 B per SM cycle)",
	"mem.sm_far_gbps":                   "0 (no limit) on the simulated machines: the SBRP artifact's and the re-study's gpgpusim.config have no per-SM limit on far writes; h100: measured, one SM with 32 warps streams 50.3 GB/s to host memory (bench/h100/measured2.csv, stream host/sms1), and two SMs each issue 256 KB at 52 GB/s at once (measured5-h100.csv, burst S2; an H200 the same)",
	"mem.sm_writes":                     "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_cache:dl1 ...,A:256:8: 256 miss-status entries per L1)",
	"mem.sm_reads":                      "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_cache:dl1 ...,A:256:8: 256 miss-status entries per L1, which GPGPU-Sim allocates to read misses); h100: measured, one SM's 4-byte loads of a line a lane read 4,096 lines in 4,112 cycles, 690 lines in flight at the measured 693-cycle round trip (bench/h100/measured9.csv, lshape line/u4 w32; a sector a lane: 662)",
	"mem.sm_read_bytes":                 "0 (no limit) on the simulated machines: GPGPU-Sim bounds an L1's reads by its miss-status entries only; h100: measured, contiguous 16-byte loads, whose lines bring 128 bytes each to the registers, keep only 370 lines in flight where 4-byte loads of a line a lane keep 690: 370 x 128 bytes (bench/h100/measured7.csv, lstream device/sms1/u4 w32: 71.6 B/cycle at 660.7 cycles; measured9.csv, lshape v16/u4 w32: 368 lines)",
	"mem.channels":                      "SBRP artifact (-gpgpu_n_mem 12); volta: the re-study's Table I (32); gope: not in Table 2, the SBRP artifact's",
	"mem.banks_per_channel":             "SBRP artifact and re-study (-gpgpu_n_sub_partition_per_mchannel 2); gope: not in Table 2, the SBRP artifact's",
	"mem.l2_port_bytes_per_cycle":       "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_cache:dl2 ...,32)",
	"mem.write_queue_entries":           "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_frfcfs_dram_sched_queue_size 64, -gpgpu_dram_partition_queues 64:64:64:64); gope: not in Table 2, the SBRP artifact's",
	"mem.reads_queue":                   "on: SBRP artifact's and the re-study's gpgpusim.config (one -gpgpu_frfcfs_dram_sched_queue_size 64 queue per channel for reads and writes: -dram_seperate_write_queue_enable is commented out; the artifact's PM channels are dram_t instances with their own such queue); gope: the SBRP artifact's; h100: off, not measured",
	"mem.sfifo_l1":                      "gope: the scoped persist barrier paper's Table 2 (L1 S-FIFO 16) and §3 (write-combining L1); 0 elsewhere (GPGPU-Sim's L1 writes global stores through)",
	"mem.volatile_slots":                "off on the simulated machines (GPGPU-Sim's L1 sends write-through stores from its miss queue, with no miss-status entry); h100: on, measured (bench/h100/measured3.csv, depth device/S131/W1-W32: a system fence beside 131 SMs streaming to device memory waits 4.0-4.25 K cycles whatever the warps, against 1.3 K alone: 131 SMs × 256 slots × 128 bytes at HBM's measured 3,157 GB/s is 2.7 K more)",
	"mem.l2_flush_at_end":               "on: SBRP artifact (-gpgpu_flush_l2_cache 1); off on volta (the re-study's gpgpusim.config leaves it off) and gope (gem5 does not flush); off on h100: a kernel's end leaves the L2's lines in place, the L2 being the device memory's point of coherence (CUDA C++ Programming Guide, device memory L2 access management: lines persist in the L2 across kernels)",
	"persist.none":                      "off; on in the dram preset",
}

//go:generate go run ../internal/keydoc/cmd/keydocgen -pkg hwmodel -root Config -var keyMeaning -o keydocs_gen.go

// KeyInfos returns the documentation of every key of Keys, in the same
// order. Doc is the key's field's doc comment (keydocs_gen.go, written by
// go generate from the fields' comments: a key is documented once, where
// its field is declared), Unit follows from the key's name and kind, Source
// comes from keySources. A field without a doc comment, or one added since
// go generate last ran, says so in Doc; one without a source has Source "".
func KeyInfos() []KeyInfo {
	var out []KeyInfo
	for _, k := range Keys() {
		doc, ok := keyMeaning[k]
		if !ok || doc == "" {
			doc = "(undocumented: give its field a doc comment and run go generate ./hwmodel)"
		}
		src, ok := keySources[k]
		if !ok {
			src = cpuKeySources[k]
		}
		out = append(out, KeyInfo{Key: k, Unit: keyUnit(k), Doc: doc, Source: src, Paths: keyPaths(k)})
	}
	return out
}

// keyUnit is key's unit (KeyInfo.Unit), from its name and kind.
func keyUnit(key string) string {
	var c Config
	f, err := field(reflect.ValueOf(&c).Elem(), key)
	switch {
	case err != nil:
		return "?"
	case f.Kind() == reflect.String:
		return "name"
	case f.Kind() == reflect.Bool:
		return "bool"
	case strings.HasSuffix(key, "_cycles"):
		return "cycles"
	case strings.HasSuffix(key, "gbps"):
		return "GB/s"
	case strings.HasSuffix(key, "_mhz"):
		return "MHz"
	case strings.Contains(key, "bytes"):
		return "bytes"
	}
	return "count"
}

// Value returns the value of key in c as Set would take it back.
func (c Config) Value(key string) (string, error) {
	f, err := field(reflect.ValueOf(&c).Elem(), key)
	if err != nil {
		return "", err
	}
	switch f.Kind() {
	case reflect.Int:
		return strconv.FormatInt(f.Int(), 10), nil
	case reflect.Float64:
		return strconv.FormatFloat(f.Float(), 'g', -1, 64), nil
	case reflect.Bool:
		return strconv.FormatBool(f.Bool()), nil
	case reflect.String:
		return f.String(), nil
	}
	return "", fmt.Errorf("%w: key %q has unsupported kind %s", ErrConfig, key, f.Kind())
}

// keyHint says which keys exist near a key that does not: the keys of its
// group if the group exists, else the groups.
func keyHint(key string) string {
	group, _, ok := strings.Cut(key, ".")
	var inGroup, groups []string
	for _, k := range Keys() {
		g, _, sub := strings.Cut(k, ".")
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
		if ok && sub && g == group {
			inGroup = append(inGroup, k)
		}
	}
	if len(inGroup) > 0 {
		return "keys of " + group + ": " + strings.Join(inGroup, ", ") + "; every key: pmbench keys"
	}
	return "groups: " + strings.Join(groups, ", ") + "; every key: pmbench keys"
}
