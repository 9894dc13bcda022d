// Command pmbench runs scopedpm's experiments and prints their results as
// tables or long-format CSV.
//
//	go run ./bench/cmd/pmbench                 # the quick default set, as tables
//	go run ./bench/cmd/pmbench -list           # what experiments there are
//	go run ./bench/cmd/pmbench -exp engine -format csv
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/pkg/profile"

	"github.com/scopedpm/scopedpm/bench"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "pmbench:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pmbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.Bool("list", false, "list the experiments and exit")
	exps := fs.String("exp", "", "comma-separated experiments to run (default: the quick default set)")
	quick := fs.Bool("quick", false, "small inputs")
	format := fs.String("format", "table", "output format: table or csv")
	var sets multiFlag
	fs.Var(&sets, "set", "hwmodel override key=value, repeatable (e.g. -set nvm.write_latency_cycles=500)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this directory")
	memprofile := fs.String("memprofile", "", "write a memory profile to this directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *list {
		for _, e := range bench.All() {
			def := ""
			if e.Default {
				def = " (default)"
			}
			fmt.Fprintf(stdout, "%-16s %s%s\n", e.Name, e.Description, def)
		}
		return nil
	}
	if *format != "table" && *format != "csv" {
		return fmt.Errorf("unknown -format %q (want table or csv)", *format)
	}
	selected, err := bench.Select(*exps)
	if err != nil {
		return err
	}
	if *exps == "" {
		*quick = true
	}
	switch {
	case *cpuprofile != "":
		defer profile.Start(profile.CPUProfile, profile.ProfilePath(*cpuprofile), profile.Quiet).Stop()
	case *memprofile != "":
		defer profile.Start(profile.MemProfile, profile.ProfilePath(*memprofile), profile.Quiet).Stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for i, e := range selected {
		rows, err := e.Run(ctx, bench.Options{Quick: *quick, Set: sets})
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		if *format == "csv" {
			if err := bench.WriteCSV(stdout, rows, i == 0); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "== %s: %s\n", e.Name, e.Description)
		if err := bench.WriteTable(stdout, rows); err != nil {
			return err
		}
	}
	return nil
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (f *multiFlag) String() string { return strings.Join(*f, ",") }

func (f *multiFlag) Set(v string) error {
	*f = append(*f, v)
	return nil
}
