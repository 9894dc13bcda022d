package bench

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// ErrPaperData is returned when the embedded table of the papers' values
// cannot be read (a broken build, caught by the package's tests).
var ErrPaperData = errors.New("bench: bad paper values table")

// paperCSV holds the values the papers report, one per line, each with the
// paper, the figure or table and the section it comes from. Only values
// stated in a paper's text or tables are in it; a value read off a plot
// would say so in its note. Values may be negative (an overhead the paper
// reports below zero); where names the section and then the figure or
// table (see PaperValue.Where).
//
//go:embed paper/values.csv
var paperCSV []byte

// PaperValue is one value a paper reports for a row of an experiment.
type PaperValue struct {
	// Experiment, Workload, Config and Metric name the row of ours the value
	// is compared with. Workload "*" matches every workload of the
	// experiment (a value the paper states for all sizes at once).
	Experiment, Workload, Config, Metric string
	// Over, if set, names a second config of the same workload: the paper
	// states Config's value relative to Over's (e.g. SBRP-near over
	// epoch-near), and ours is compared as Config's value over Over's.
	Over string
	// Value is the number the paper reports, as it reports it (a
	// percentage in percent); it may be negative.
	Value float64
	// Paper is the paper's short name (see REFERENCES.md), Where the
	// section and figure or table, Note how the value was read. Where is
	// the section, then ", ", then the figure or table ("Fig. 6",
	// "Fig. 10(b)", "Table 3", "Table V"). A numbered section is "§7.2"; a
	// paper without section numbers (the re-study) names its headings as
	// printed, outermost first, each followed by ", " ("Experimental
	// Results for Parboil Benchmark, A. Short-Running Kernels, Fig. 1").
	Paper, Where, Note string
}

// Label is the config the comparison is about: Config, or "Config over
// Over" for a relative value.
func (p PaperValue) Label() string {
	if p.Over == "" {
		return p.Config
	}
	return p.Config + " over " + p.Over
}

var (
	paperOnce sync.Once
	paperVals []PaperValue
	paperErr  error
)

// PaperValues returns every value of the embedded table.
func PaperValues() ([]PaperValue, error) {
	paperOnce.Do(func() { paperVals, paperErr = parsePaper(paperCSV) })
	return paperVals, paperErr
}

// PaperValuesFor returns the values the papers report for experiment exp.
func PaperValuesFor(exp string) ([]PaperValue, error) {
	all, err := PaperValues()
	if err != nil {
		return nil, err
	}
	var out []PaperValue
	for _, v := range all {
		if v.Experiment == exp {
			out = append(out, v)
		}
	}
	return out, nil
}

var paperHeader = []string{"experiment", "workload", "config", "over", "metric", "value", "paper", "where", "note"}

func parsePaper(data []byte) ([]PaperValue, error) {
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPaperData, err)
	}
	if len(recs) == 0 || fmt.Sprint(recs[0]) != fmt.Sprint(paperHeader) {
		return nil, fmt.Errorf("%w: header must be %v", ErrPaperData, paperHeader)
	}
	var out []PaperValue
	for i, r := range recs[1:] {
		v, err := strconv.ParseFloat(r[5], 64)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: value %q: %w", ErrPaperData, i+2, r[5], err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: line %d: value %q is not a number a paper reports", ErrPaperData, i+2, r[5])
		}
		p := PaperValue{Experiment: r[0], Workload: r[1], Config: r[2], Over: r[3], Metric: r[4],
			Value: v, Paper: r[6], Where: r[7], Note: r[8]}
		if p.Experiment == "" || p.Workload == "" || p.Config == "" || p.Metric == "" || p.Paper == "" || p.Where == "" || p.Note == "" {
			return nil, fmt.Errorf("%w: line %d: experiment, workload, config, metric, paper, where and note are required", ErrPaperData, i+2)
		}
		if err := checkWhere(p.Where); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrPaperData, i+2, err)
		}
		out = append(out, p)
	}
	return out, nil
}

var (
	// whereItem is a figure or table: "Fig. 6", "Fig. 11(a)", "Table 3",
	// "Table V".
	whereItem = regexp.MustCompile(`^(Fig\. [0-9]+|Table [0-9IVX]+)(\([a-z]\))?$`)
	// whereNumber is a numbered section: "§7", "§7.2.4".
	whereNumber = regexp.MustCompile(`^§[0-9]+(\.[0-9]+)*$`)
	// whereHeading is a heading as printed: a capital, then letters,
	// digits, spaces, hyphens and full stops ("A. Short-Running Kernels").
	whereHeading = regexp.MustCompile(`^[A-Z][A-Za-z0-9 .-]*[A-Za-z0-9]$`)
)

// checkWhere checks a value's Where: a numbered section, or one or more
// headings, then a figure or table (see PaperValue.Where).
func checkWhere(where string) error {
	parts := strings.Split(where, ", ")
	bad := func(why string) error {
		return fmt.Errorf("where %q: %s (want \"§7.2, Fig. 6\", or the headings of an unnumbered section, outermost first, then the figure or table: \"Experimental Results for Parboil Benchmark, A. Short-Running Kernels, Fig. 1\")", where, why)
	}
	if len(parts) < 2 {
		return bad("no section")
	}
	if !whereItem.MatchString(parts[len(parts)-1]) {
		return bad("it does not end with a figure or table")
	}
	secs := parts[:len(parts)-1]
	if whereNumber.MatchString(secs[0]) {
		if len(secs) > 1 {
			return bad("a numbered section is one number")
		}
		return nil
	}
	for _, h := range secs {
		if !whereHeading.MatchString(h) || whereItem.MatchString(h) {
			return bad(fmt.Sprintf("%q is neither a section number nor a heading", h))
		}
	}
	return nil
}

// Comparison is a paper's value beside ours.
type Comparison struct {
	PaperValue
	// Workload is the workload of ours compared (PaperValue.Workload may
	// be "*").
	Workload string
	// Ours is our value (Config's, or Config's over Over's); Found is
	// false when this run has no such row (another size, another shard).
	Ours  float64
	Found bool
}

// Ratio is ours over the paper's value: NaN when ours was not found, and
// when the paper's value is not positive (a ratio to an overhead of -0.1%
// or 0% says nothing; compare such values by their difference).
func (c Comparison) Ratio() float64 {
	if !c.Found || c.Value <= 0 {
		return nan
	}
	return c.Ours / c.Value
}

// Compare puts the papers' values for the experiment of rows beside ours.
func Compare(rows []Row, vals []PaperValue) []Comparison {
	type key struct{ workload, config, metric string }
	ours := map[key]float64{}
	var workloads []string
	seen := map[string]bool{}
	for _, r := range rows {
		ours[key{r.Workload, r.Config, r.Metric}] = r.Value
		if !seen[r.Workload] {
			seen[r.Workload] = true
			workloads = append(workloads, r.Workload)
		}
	}
	var out []Comparison
	for _, v := range vals {
		wls := []string{v.Workload}
		if v.Workload == "*" {
			wls = nil
			for _, w := range workloads {
				if _, ok := ours[key{w, v.Config, v.Metric}]; ok {
					wls = append(wls, w)
				}
			}
			if len(wls) == 0 {
				wls = []string{"*"}
			}
		}
		for _, w := range wls {
			c := Comparison{PaperValue: v, Workload: w}
			a, ok := ours[key{w, v.Config, v.Metric}]
			if v.Over != "" {
				b, okb := ours[key{w, v.Over, v.Metric}]
				ok = ok && okb && b != 0
				if ok {
					a /= b
				}
			}
			c.Ours, c.Found = a, ok
			out = append(out, c)
		}
	}
	return out
}
