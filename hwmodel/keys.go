package hwmodel

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// KeyInfo documents one key of Config.Set: what it sets, in which unit,
// and where the SBRP machine's value (sbrpBase, the pm-near, pm-far and
// pm-far-eadr presets) comes from, and the volta preset's where it differs.
// Every key of Keys has one (a test keeps it so).
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
	case strings.HasPrefix(key, "pcie.") && key != "pcie.pm_far":
		return "every GPU model, with pcie.pm_far"
	}
	return "every GPU model"
}

// keyDocs holds Unit, Doc and Source per key.
var keyDocs = map[string][3]string{
	"name":                              {"name", "names the configuration in Backend.Name", "the preset's name"},
	"gpu.clock_mhz":                     {"MHz", "core clock; converts cycles to time", "SBRP Table 1 (1365 MHz); volta: the re-study's GPGPU-Sim configuration (1132 MHz, -gpgpu_clock_domains)"},
	"gpu.sms":                           {"count", "streaming multiprocessors", "SBRP Table 1 (30); volta: the re-study's Table I (80)"},
	"gpu.warp_size":                     {"count", "threads per warp", "CUDA (32)"},
	"gpu.schedulers":                    {"count", "warp schedulers per SM: warp instructions issued per cycle", "assumed: GPGPU-Sim's Pascal/Volta configs (4); not in SBRP Table 1"},
	"gpu.max_threads_per_sm":            {"count", "resident threads per SM", "CUDA limit (2048); not in SBRP Table 1"},
	"gpu.max_blocks_per_sm":             {"count", "resident blocks per SM", "CUDA limit (32); not in SBRP Table 1"},
	"gpu.max_threads_per_block":         {"count", "threads in one block", "SBRP Table 1 (1024)"},
	"gpu.launch_latency_cycles":         {"cycles", "from a kernel's launch to its first instruction; launches run one after another", "SBRP/GPM artifacts' and the re-study's gpgpusim.config (-gpgpu_kernel_launch_latency 5000); gope: 0, not in the scoped persist barrier paper"},
	"gpu.smem_latency_cycles":           {"cycles", "shared-memory access latency on the SM, after the access's bank-conflict passes", "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_smem_latency 20); gope: the SBRP artifact's, not in Table 2"},
	"gpu.smem_banks":                    {"count", "4-byte shared-memory banks: a warp access takes one pass (one cycle of the SM's shared memory) per distinct word in its busiest bank", "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_shmem_num_banks 32); gope: GCN's LDS (32 banks), not in Table 2"},
	"gpu.smem_bytes":                    {"bytes", "shared memory per SM: the blocks resident on an SM hold at most this much", "SBRP artifact's gpgpusim.config (-gpgpu_shmem_size 65536); volta: the re-study's Table I (96 KB); gope: GCN's 64 KB LDS, not in Table 2"},
	"gpu.fence_block_cycles":            {"cycles", "a block-scope memory fence's cost (0: one issue cycle)", "0 on the simulated machines; h100: measured, __threadfence_block after a store over a plain store (shared/calibration/h100, lat host/lanes32: 31.6 - 21.6)"},
	"gpu.fence_device_cycles":           {"cycles", "a device-scope memory fence's cost (0: an L2 round trip, l2.latency_cycles)", "0 on the simulated machines (the SBRP artifact's device fence is an L2 round trip); h100: measured, __threadfence after a store over a plain store (lat host/lanes32: 725.6 - 21.6)"},
	"gpu.fence_system_cycles":           {"cycles", "a system-scope fence's round trip, and GPM's persist's: it ends at the later of its own round trip and the last ack plus half of it (the ack's way back) (0: an L2 round trip added after the acks)", "0 on the simulated machines (SBRP artifact: GPM adds a device fence after every persistency verb); h100: measured, __threadfence_system with nothing pending (lat host/lanes32 system-nostore: 1,279.6)"},
	"gpu.serial_loads":                  {"bool", "every load blocks its warp until its data is back, gathered ones too (no memory-level parallelism in a warp)", "off: GPGPU-Sim's scoreboard (SBRP artifact, re-study) overlaps a warp's independent loads"},
	"l1.size_bytes":                     {"bytes", "per-SM L1 data cache capacity", "SBRP Table 1 (64 KB); volta: the re-study's Table I (32 KB)"},
	"l1.line_bytes":                     {"bytes", "L1 line; warp accesses coalesce into lines of this size", "SBRP artifact (128)"},
	"l1.assoc":                          {"count", "L1 ways per set", "assumed (4); not in SBRP Table 1"},
	"l1.latency_cycles":                 {"cycles", "L1 hit latency", "SBRP artifact (20)"},
	"l2.size_bytes":                     {"bytes", "shared L2 capacity", "SBRP Table 1 (3 MB); volta: the re-study's Table I (6 MB)"},
	"l2.line_bytes":                     {"bytes", "L2 line", "SBRP artifact (128)"},
	"l2.assoc":                          {"count", "L2 ways per set", "assumed (16); not in SBRP Table 1; volta: the re-study's GPGPU-Sim configuration (24: -gpgpu_cache:dl2 S:32:128:24 per L2 bank)"},
	"l2.latency_cycles":                 {"cycles", "L2 hit latency (ROP)", "SBRP artifact (160)"},
	"dram.read_latency_cycles":          {"cycles", "device-memory read latency after an L2 miss", "SBRP artifact (100); volta: the re-study's Table I (150)"},
	"dram.write_latency_cycles":         {"cycles", "device-memory write latency", "SBRP artifact (100); volta: the re-study's Table I (150)"},
	"dram.read_gbps":                    {"GB/s", "device-memory read bandwidth", "SBRP Table 1 (336 GB/s GDDR); volta: the re-study's GPGPU-Sim HBM (32 channels × 16 B × 2 × 850 MHz = 870.4 GB/s)"},
	"dram.write_gbps":                   {"GB/s", "device-memory write bandwidth", "SBRP Table 1 (336 GB/s GDDR); volta: the re-study's GPGPU-Sim HBM (32 channels × 16 B × 2 × 850 MHz = 870.4 GB/s)"},
	"nvm.read_latency_cycles":           {"cycles", "NVM read latency after an L2 miss", "SBRP artifact: device memory + 300 (400); volta: the re-study's Table I (200 read, 600 write)"},
	"nvm.write_latency_cycles":          {"cycles", "NVM write latency from the L2 to the ack at the persistence point", "SBRP artifact: device memory + 300 (400); volta: the re-study's Table I (200 read, 600 write)"},
	"nvm.read_gbps":                     {"GB/s", "NVM read bandwidth", "SBRP Table 1 (84 GB/s, 1/4 of GDDR in the artifact); gope: device memory's (the scoped persist barrier paper's Table 2 sets NVRAM apart by latency alone); volta: the re-study's GPGPU-Sim configuration, whose NVM is its HBM model with NVM latencies (870.4 GB/s, shared by reads and writes there)"},
	"nvm.write_gbps":                    {"GB/s", "NVM write bandwidth", "SBRP Table 1 (42 GB/s, 1/8 of GDDR in the artifact); gope: device memory's (the scoped persist barrier paper's Table 2 sets NVRAM apart by latency alone); volta: the re-study's GPGPU-Sim configuration, whose NVM is its HBM model with NVM latencies (870.4 GB/s, shared by reads and writes there)"},
	"nvm.shared_bus":                    {"bool", "NVM reads and writes share one bus, a read byte taking it at nvm.read_gbps and a written byte at nvm.write_gbps", "on: the SBRP artifact's PM is a GDDR channel model whose bursts are scaled down per direction (dram.cc: BL/4 read, BL/8 write, -pm_bw_scale_read/-write), and a channel's data bus carries both; volta: the re-study's GPGPU-Sim HBM channel, whose data bus carries both"},
	"dram.shared_bus":                   {"bool", "device-memory reads and writes share one bus, each direction at its own bandwidth", "off: SBRP Table 1 gives one GDDR bandwidth, taken as each direction's"},
	"pcie.pm_far":                       {"bool", "PM is on the host: PM traffic crosses the PCIe link", "SBRP PM-far (pm-far, pm-far-eadr presets)"},
	"pcie.latency_cycles":               {"cycles", "PCIe latency, added once to a far access's way there", "SBRP Table 1 (300 ns = 410 cycles); pm-far: the artifact's 600; h100: half the measured system fence (1,280 cycles to the host and back) less the L2's 160"},
	"pcie.gbps":                         {"GB/s", "PCIe bandwidth", "SBRP Table 1 (28 GB/s)"},
	"pcie.tlp_bytes":                    {"bytes", "what each transfer adds on the PCIe link beyond its data (packet framing, sequence number, header, link CRC)", "0: SBRP Table 1's 28 GB/s is a data rate; h100: the PCIe 3.0+ memory-write TLP (4-byte STP token, 16-byte header for a 64-bit address, 4-byte LCRC: 24)"},
	"pcie.full_duplex":                  {"bool", "each PCIe direction has its own bandwidth", "off on the SBRP machines: the artifact's far PM is one GDDR channel model scaled to 28 GB/s both ways (dram.cc, -pm_bw_scale_read/-write 12), so reads and writes share it; h100: on (a real PCIe link is full duplex); off on volta and gope (PM is near: no link)"},
	"persist.point":                     {"name", "persistence point: adr (memory controller's PM queue) or eadr (last-level cache)", "SBRP artifact (adr); pm-far-eadr: SBRP §7.3 (eadr)"},
	"persist.eadr_latency_cycles":       {"cycles", "latency from the L2 or the far end of PCIe to the eADR point", "SBRP artifact: PM-far eADR +600 over device memory (100); volta: the DRAM latency of the re-study's Table I (150; the re-study has no eADR)"},
	"persist.buffer_entries":            {"count", "SBRP persist-buffer entries per SM (markers take entries too)", "SBRP artifact (256; Fig. 10a sweeps 32-256)"},
	"persist.window":                    {"count", "SBRP: most lines an SM's persist buffer has flushed and not had acknowledged (SBRP only; every model's writes are bounded by mem.sm_writes)", "SBRP Table 1 (6; Fig. 10c sweeps 2-12)"},
	"persist.ack_at_queue":              {"bool", "a persist is acked when the GPU's memory partition passes it to the PM queue (the queue's room gates it; PM-far's link latency and the NVM write latency come after the ack), under ADR and eADR", "on: SBRP artifact (every PM write is acked when the partition issues it into the PM's latency pipeline, l2cache.cc dram_cycle, -pm_enable_adr 1 in every configuration); h100: off (the host acknowledges); volta: ADR puts the WPQ in the persistence domain, and the re-study's GPGPU-Sim spends -dram_write_latency inside its WPQ (a PCommit under PCT waits for that drain)"},
	"persist.epoch_own_acks":            {"bool", "an Epoch/GPM fence or barrier waits for its own warp's persists, not every flush of the SM", "on: SBRP artifact's simulator (a warp waits for its outstanding persists); off on volta (not the SBRP artifact's simulator)"},
	"persist.epoch_write_through":       {"bool", "Epoch and GPM write each PM store through the L1 (the store waits for its write to leave the SM); a fence waits for the acks", "off on the SBRP machines: the artifact's epoch and GPM configurations run -pm_model 3, whose L1 is write-back for PM (-gpgpu_cache:dl1 ...L:B) and flushes the L1's PM lines at every persistent op (shader.cc perform_ordering_ops), as the SBRP paper describes Epoch; h100: on (NVIDIA's L1 writes global stores through); off on volta (the re-study's models have their own write-back path)"},
	"persist.sector_bytes":              {"bytes", "a line's write (every model's write-back, write-through or flush, and a volatile store's) sends only its written sectors of this size (0: the whole line)", "SBRP machines and dram: the SBRP artifact's sectored L1 (GPGPU-Sim sector cache, 32-byte sectors); volta: GPGPU-Sim 4.0's QV100 sector caches (32, as writeback.sector_bytes, which the re-study's write-back models read); gope: 0, gem5's caches are not sectored"},
	"persist.nvw_fifo_l1":               {"count", "NVW-FIFO entries per L1: dirty PM lines an L1 tracks; a full FIFO writes its head's line to the L2 (ScopedBarrier)", "scoped persist barrier paper Table 2 (16)"},
	"persist.nvw_fifo_l2":               {"count", "NVW-FIFO entries in the L2: dirty PM lines the L2 tracks; a full FIFO writes its head's line back to NVM (ScopedBarrier)", "scoped persist barrier paper Table 2 (64)"},
	"writeback.channels":                {"count", "memory channels the re-study's L2 write-back walk proceeds over in parallel (0: the re-study's write-back GPU is off)", "off on the SBRP machines; volta: the re-study's Table I (32 channels)"},
	"writeback.l2_banks_per_channel":    {"count", "L2 banks per channel the L2WB walk visits in parallel", "off on the SBRP machines; volta: the re-study's Table I (2 per channel)"},
	"writeback.l2_tag_checks_per_cycle": {"count", "L2 tags one bank checks per cycle in an L2WB walk", "off on the SBRP machines; volta: the re-study's GPGPU-Sim (24: data_cache::nvm_wb_timing examines up to the L2's associativity per cycle), not in the paper"},
	"writeback.sector_bytes":            {"bytes", "L2 sector: write-backs and write-throughs send only the sectors written", "off on the SBRP machines; volta: GPGPU-Sim 4.0's QV100 configuration (32)"},
	"mem.inject_bytes_per_cycle":        {"bytes", "an SM's injection bandwidth into the interconnect per cycle: every line it writes or reads crosses it", "SBRP artifact's and the re-study's gpgpusim.config (-icnt_flit_size 40: one flit, a 32-byte sector and its header, per cycle per node); the H100 measurement (shared/calibration/h100: one SM streams 53-63 GB/s to device memory, about 32 B per SM cycle)"},
	"mem.sm_writes":                     {"count", "most line writes an SM has outstanding (sent, not acknowledged), every model's", "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_cache:dl1 ...,A:256:8: 256 miss-status entries per L1)"},
	"mem.channels":                      {"count", "memory channels; NVM and device-memory bandwidth are split evenly over them", "SBRP artifact (-gpgpu_n_mem 12); volta: the re-study's Table I (32); gope: not in Table 2, the SBRP artifact's"},
	"mem.banks_per_channel":             {"count", "L2 banks (memory sub-partitions) per channel; lines interleave over every bank", "SBRP artifact and re-study (-gpgpu_n_sub_partition_per_mchannel 2); gope: not in Table 2, the SBRP artifact's"},
	"mem.l2_port_bytes_per_cycle":       {"bytes", "an L2 bank's data port per cycle", "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_cache:dl2 ...,32)"},
	"mem.write_queue_entries":           {"count", "a channel's write queue per device (device memory, NVM): a write holds an entry until the device has written it (its share of the bandwidth, then its write latency); under ADR the PM queue is the persistence point", "SBRP artifact's and the re-study's gpgpusim.config (-gpgpu_frfcfs_dram_sched_queue_size 64, -gpgpu_dram_partition_queues 64:64:64:64); gope: not in Table 2, the SBRP artifact's"},
	"mem.sfifo_l1":                      {"count", "S-FIFO entries per L1: the dirty volatile lines a write-combining L1 keeps; a full S-FIFO writes its head's line to the L2, a device- or system-scope release and the kernel's end write them all (0: volatile stores are written through to the L2)", "gope: the scoped persist barrier paper's Table 2 (L1 S-FIFO 16) and §3 (write-combining L1); 0 elsewhere (GPGPU-Sim's L1 writes global stores through)"},
	"mem.l2_flush_at_end":               {"bool", "the L2's dirty volatile lines are written back at every kernel's end, and the kernel ends once the memory queues took them", "on: SBRP artifact (-gpgpu_flush_l2_cache 1); off on volta (the re-study's gpgpusim.config leaves it off) and gope (gem5 does not flush)"},
	"persist.none":                      {"bool", "PM timed as device memory, no persist work (the DRAM-only machine); it runs the none model only: hwmodel.New refuses another", "off; on in the dram preset"},
}

// KeyInfos returns the documentation of every key of Keys, in the same
// order. A key without documentation (a field added without an entry here)
// gets Unit "?" and says so in Doc.
func KeyInfos() []KeyInfo {
	var out []KeyInfo
	for _, k := range Keys() {
		d, ok := keyDocs[k]
		if !ok {
			d = [3]string{"?", "(undocumented: add it to hwmodel/keys.go)", ""}
		}
		out = append(out, KeyInfo{Key: k, Unit: d[0], Doc: d[1], Source: d[2], Paths: keyPaths(k)})
	}
	return out
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
