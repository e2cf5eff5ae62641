package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

// WriteJSON writes the result as an indented JSON object, each run with its full loadgen report.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the result for people: the setting, one table row per run and what each
// column means.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	m, pg := r.Machine, r.Machine.Postgres
	exchange := "pmx dev"
	if r.DevShards > 0 {
		shards := "shards"
		if r.DevShards == 1 {
			shards = "shard"
		}
		exchange = fmt.Sprintf("pmx dev with %d %s (its pool %d connections, one more for each shard)", r.DevShards, shards, r.DevPool)
	}
	if d := r.Distributed; d != nil {
		exchange = fmt.Sprintf("the distributed exchange (pmx operator on a kube-apiserver, %d pmx shard, %d pmx api; the bots spread over the api)", d.Shards, d.Fronts)
	}
	given := ""
	for _, name := range slices.Sorted(maps.Keys(pg.Settings)) {
		given += "; " + name + " " + pg.Settings[name]
	}
	fmt.Fprintf(&b, "pmxtools bench: %s on a private PostgreSQL %s, fresh for each run (fsync %s, synchronous_commit %s, full_page_writes %s%s), driven by pmxtools loadgen\n",
		exchange, pg.Version, pg.Fsync, pg.SynchronousCommit, pg.FullPageWrites, given)
	cpu := ""
	if m.CPU != "" {
		cpu = " (" + m.CPU + ")"
	}
	fmt.Fprintf(&b, "%-8s %d cores%s, %s/%s, %s\n", "machine", m.Cores, cpu, m.OS, m.Arch, m.GoVersion)
	fmt.Fprintf(&b, "%-8s %s\n", "command", r.Command)
	fmt.Fprintf(&b, "%-8s %s\n", "pmx", r.PMX)
	if r.WarmWALMiB > 0 {
		fmt.Fprintf(&b, "%-8s warmed before each run: %d MiB written, then a checkpoint, so that the run writes into recycled files\n", "wal", r.WarmWALMiB)
	}
	if r.DBLatencyUs > 0 {
		fmt.Fprintf(&b, "%-8s through the bench's proxy, adding %s to every round trip (half each way), as a Postgres on another node; the bench's own connection direct\n",
			"database", formatUs(r.DBLatencyUs))
	}
	if f := r.Fees; f != nil {
		fmt.Fprintf(&b, "%-8s every market's schedule: taker %d, maker %d basis points of P × (1 − P) per share\n", "fees", f.TakerBps, f.MakerBps)
	}
	warmup := ""
	if r.WarmupSeconds > 0 {
		warmup = " after a warm-up of " + time.Duration(r.WarmupSeconds*float64(time.Second)).String()
	}
	fmt.Fprintf(&b, "%-8s %d bots on %d markets, %s per run%s, seed %d, %s mix; rate limits lifted (PMX_READ_RATE=0 PMX_WRITE_RATE=0)\n\n", "load", r.Bots, r.Markets,
		time.Duration(r.DurationSeconds*float64(time.Second)), warmup, r.Seed, cmp.Or(r.Mix, loadgen.MixBasic))

	if f := r.Floors; f != nil {
		fmt.Fprintf(&b, "floors: HTTP alone %s requests/s (%d bots, a server that does nothing); one durable commit %s back to back (a round trip %s)\n\n",
			formatRate(f.HTTPRequestsPerSec), r.Bots, formatUs(f.CommitP50Us), formatUs(f.RoundTripP50Us))
	}
	const row = "%-14s %10s %8s %8s %8s  %10s  %8s  %9s %8s %8s  %5s %5s %7s"
	fmt.Fprintf(&b, row, "load", "orders/s", "p50", "p99", "p99.9", "xact/order", "rowlocks", "CPU/order", "pmx", "postgres", "cores", "other", "failed")
	if r.Floors != nil {
		fmt.Fprintf(&b, "  %7s %10s", "of HTTP", "p50/commit")
	}
	b.WriteString("\n")
	for i := range r.Runs {
		x := &r.Runs[i]
		load := "closed loop"
		if x.Mode == "open" {
			load = "open " + formatCount(x.OfferedRate) + "/s"
		}
		perOrder := func(v float64) string {
			if x.Orders == 0 {
				return "-"
			}
			return formatUs(int64(math.Round(v)))
		}
		xact := "-"
		if x.Orders > 0 {
			xact = strconv.FormatFloat(x.TransactionsPerOrder, 'f', 2, 64)
		}
		fmt.Fprintf(&b, row, load, formatRate(x.OrdersPerSec), latency(x, x.P50Us), latency(x, x.P99Us), latency(x, x.P999Us),
			xact, rowLocks(x.LockWaits), perOrder(x.CPUPerOrderUs), perOrder(x.PMXPerOrderUs), perOrder(x.PGPerOrderUs),
			strconv.FormatFloat(x.CoresBusy, 'f', 2, 64), strconv.FormatFloat(x.OtherCores, 'f', 2, 64), formatCount(float64(x.Failed)))
		if f := r.Floors; f != nil {
			ofHTTP, ofCommit := r.ofFloors(x)
			fmt.Fprintf(&b, "  %7s %10s", ofHTTP, ofCommit)
		}
		b.WriteString("\n")
	}
	for i := range r.Runs {
		if x := &r.Runs[i]; x.Orders > 0 && x.WALBytesPerOrder > 0 {
			fmt.Fprintf(&b, "wal, run %d: %s bytes and %s full-page images per order, %d checkpoints; WAL files: %d ready at the start, %s created\n",
				i+1, formatCount(math.Round(x.WALBytesPerOrder)), strconv.FormatFloat(x.WALFPIPerOrder, 'f', 2, 64), x.Checkpoints,
				x.WALFilesReady, countOrDash(x.WALFilesCreated))
		}
	}
	for i := range r.Runs {
		if x := &r.Runs[i]; x.Orders > 0 && len(x.CPU.PMXByProcess) > 0 {
			fmt.Fprintf(&b, "cpu, run %d: pmx's CPU per order by process, %s; the rest of the machine (the control plane in it) %s cores\n",
				i+1, byProcess(x), strconv.FormatFloat(x.OtherCores, 'f', 2, 64))
		}
	}
	for i := range r.Runs {
		if f := r.Runs[i].FeesTaken; f != nil {
			fmt.Fprintf(&b, "fees, run %d: the exchange took %s cents net of rebates, from %s trades that paid a fee\n",
				i+1, formatCount(float64(f.Net)), formatCount(float64(f.Trades)))
		}
	}
	for i := range r.Runs {
		if l := r.Runs[i].LockWaits; l != nil && l.Samples > 0 {
			fmt.Fprintf(&b, "locks, run %d: %s backends waiting on row locks per sample (at most %d), %s on any lock (at most %d); %d samples, one every %s\n",
				i+1, strconv.FormatFloat(l.RowMean, 'f', 2, 64), l.RowMax, strconv.FormatFloat(l.AnyMean, 'f', 2, 64), l.AnyMax,
				l.Samples, time.Duration(l.IntervalMs*float64(time.Millisecond)))
		}
	}
	for i := range r.Runs {
		if l := r.Runs[i].LockWaits; l != nil && l.Samples > 0 {
			fmt.Fprintf(&b, "backends, run %d: Postgres's client backends not idle, per sample: %s\n", i+1, byActivity(l.Backends))
		}
	}
	for i := range r.Runs {
		if c := r.Runs[i].Shards; c != nil && c.Batches > 0 {
			fmt.Fprintf(&b, "shards, run %d: %s batches of %s commands; %s of the commands pipelined, %s held; %s batches read what they reserve from, %s ran again, %s failed; %s acquires of cash (%s of the batches%s)%s; %s\n",
				i+1, formatCount(float64(c.Batches)), strconv.FormatFloat(float64(c.Commands)/float64(c.Batches), 'f', 1, 64),
				share(c.Pipelined, c.Commands), share(c.Held, c.Commands), countOrDash(c.Read), countOrDash(c.Rerun), countOrDash(c.Failures),
				countOrDash(c.Acquires), share(c.Acquires, c.Batches), eachCost(c.AcquireSeconds, c.Acquires), asideAcquires(c), databaseBusy(c))
		}
	}
	for i := range r.Runs {
		if l := r.Runs[i].Loadgen; l != nil && l.Warmup != nil {
			w := l.Warmup
			fmt.Fprintf(&b, "warm-up, run %d: %s before it, in none of its figures: %s orders/s, placement p50 %s p99 %s max %s, %s failed\n",
				i+1, loadgen.FormatLatency(time.Duration(w.Seconds*float64(time.Second))), formatRate(w.OrdersPerSec),
				formatUs(w.P50Us), formatUs(w.P99Us), formatUs(w.MaxUs), formatCount(float64(w.Failed)))
		}
	}
	for i := range r.Runs {
		if t := r.Runs[i].Server; t != nil {
			commits := ""
			if t.CommitP99 != nil {
				commits = fmt.Sprintf(", of their %s commits %s", formatCount(float64(t.Commits)), t.CommitP99)
			}
			fmt.Fprintf(&b, "server, run %d: p99 of the shards' %s batches %s%s; of the %s POST /order pmx answered %s\n",
				i+1, formatCount(float64(t.Batches)), t.BatchP99, commits, formatCount(float64(t.Orders)), t.OrderP99)
		}
	}
	for i := range r.Runs {
		if f := r.Runs[i].Feed; f != nil {
			fmt.Fprintf(&b, "feed, run %d: %d subscribers received %s events/s together (%s events), commit to receipt p50 %s p99 %s, %d disconnects\n",
				i+1, f.Subscribers, formatRate(f.EventsPerSec), formatCount(float64(f.Events)), formatUs(f.P50Us), formatUs(f.P99Us), f.Disconnects)
		}
	}
	for i := range r.Runs {
		x := &r.Runs[i]
		if st := x.Statements; st != nil && x.Orders > 0 {
			fmt.Fprintf(&b, "statements, run %d: Postgres executed %s of statements per order; the most:\n", i+1, formatUs(int64(math.Round(st.ExecUsPerOrder))))
			for _, s := range st.Top {
				fmt.Fprintf(&b, "  %9s/order %9s calls %9s/call  %s\n", formatUsFrac(s.ExecUsPerOrder), formatCount(float64(s.Calls)), formatUs(int64(math.Round(s.ExecUsPerCall))), s.Kind)
			}
		}
	}
	b.WriteString(`
orders/s    placements acknowledged per second of the run, each placement of a batch counted
p50..p99.9  latency of single placements (POST /order) to the last response byte, from the send
            (closed loop) or from the scheduled send time (open loop, so queueing behind a stall
            counts); -v or --json gives every request kind's
xact/order  Postgres transactions (pg_stat_database xact_commit + xact_rollback) per order
rowlocks    Postgres backends waiting on row locks, mean per sample: pg_stat_activity read every
            100ms during the load, counting the backends with wait_event_type Lock and
            wait_event transactionid (waiting for the transaction holding a row) or tuple (queued
            behind such a waiter); the locks lines give the most in one sample, and the backends
            waiting on any lock (advisory, relation, ... too)
CPU/order   CPU time (user + system, from /proc) of pmx (pmx dev, or every pmx process of the
            distributed exchange) and every Postgres process per order, then split into pmx and
            postgres; the load generator's own CPU is not in it
cores       CPU seconds per second of pmx, Postgres and the load generator together
other       CPU seconds per second of every other process (/proc/stat): well above 0, the run was disturbed
cpu         the distributed exchange's pmx CPU per order by what each process runs, all of a kind
            together; its other is mostly the control plane (kube-apiserver and etcd)
wal         WAL Postgres wrote per order, with the pages it copied whole (the first change of each
            page after a checkpoint), and the checkpoints completed during the run; the WAL files
            made ahead when it began (recycled by a checkpoint: --warm-wal) and those created
            during it, each zero-filled while commits wait for it ("-": a checkpoint ran)
backends    what Postgres's client backends but the bench's own were doing, mean per sample (the
            samples of rowlocks), the idle left out: running (on a CPU, or in a wait Postgres does
            not report), idle in transaction (its transaction waiting for its client: pmx, or the
            round trip to it), else the wait it was in as wait_event_type:wait_event (IO:WALSync
            flushing the WAL at a commit, LWLock:WALWrite queued for that flush, Client:ClientRead
            reading the client's next message, Lock:transactionid a row lock, ...)
shards      what the shards counted during the load (their /metrics, summed): batches and commands
            per batch; commands matched while the batch before theirs committed (pipelined) and
            those that could not join it and waited for two commits (held); batches that read
            what their placements reserve from, ran again or failed; the acquires of cash (moving an
            account's free cash to a shard before a batch that needed it) and what one took on
            average, then those made aside (for accounts a shard met while a batch of its own
            committed: its loop waited for each, most in its first seconds); the share of the time
            each shard's connection spent on its batches' round trips to Postgres, and one's mean:
            near 100%, the shards are bound by Postgres, not by pmx ("-": not exported by this pmx)
warm-up     with --warmup: the load before each run, apart from its figures, as an exchange just started
            (its caches filled and connections opened by the bots' first requests) answers it
server      the 99th percentiles of the latency histograms pmx keeps (its /metrics, summed over the
            same time as shards): a shard's batch, from its first command to its commit; its
            commit, the writes' and commit's round trip to Postgres once the batch was built; and a
            single placement (POST /order), from its route matched to its answer written; within a
            factor of two (the buckets double). Far below the bots' p99, the tail is made outside
            pmx's handlers: the kernel's queues, the network, the load generator, no free CPU; the
            batches' far above the commits', it is made in the shard, not in Postgres
`)
	if slices.ContainsFunc(r.Runs, func(x RunResult) bool { return x.Statements != nil }) {
		b.WriteString(`statements  execution time of the statements pmx sent Postgres (pg_stat_statements), per order: in all,
            and for the kinds that took most; a batch's write statement is named by its parts
`)
	}
	if r.Floors != nil {
		b.WriteString(`of HTTP     orders/s as a share of the HTTP floor's requests/s, measured in this bench: how much of
            what this machine can serve over HTTP at all the exchange reaches
p50/commit  the p50 as a multiple of one durable commit back to back (the commit floor), measured in
            this bench: a placement is answered after its batch commits, so 1.0 is the least possible
`)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// byActivity lists the backends' activities, the most first, each mean to two places; those that
// round to 0.00 are counted at the end ("none" when no backend was ever seen busy).
func byActivity(m map[string]float64) string {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	var parts []string
	small := 0
	for _, a := range names {
		if v := strconv.FormatFloat(m[a], 'f', 2, 64); v != "0.00" {
			parts = append(parts, v+" "+a)
		} else {
			small++
		}
	}
	switch {
	case small > 0:
		parts = append(parts, fmt.Sprintf("%d more under 0.01", small))
	case len(parts) == 0:
		return "none"
	}
	return strings.Join(parts, ", ")
}

// rowLocks is the mean of backends waiting on row locks per sample, "-" where none was taken.
func rowLocks(l *LockWaits) string {
	if l == nil || l.Samples == 0 {
		return "-"
	}
	return strconv.FormatFloat(l.RowMean, 'f', 2, 64)
}

// share is part as a percentage of whole, "-" where part is unknown (-1) or whole is none.
func share(part, whole int64) string {
	if part < 0 || whole <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}

// databaseBusy says how much of the shards' time their connections spent on their batches' round
// trips to Postgres, and how long one took on average (c counted at least one batch).
func databaseBusy(c *ShardCounters) string {
	busy := c.DatabaseBusy()
	if busy < 0 {
		return "Postgres busy - of each shard's time"
	}
	return fmt.Sprintf("Postgres busy %s of each shard's time, %s a batch", strconv.FormatFloat(100*busy, 'f', 0, 64)+"%",
		formatUs(int64(math.Round(c.DatabaseSeconds/float64(c.Batches)*1e6))))
}

// eachCost is what one of n acquires taking seconds in all took on average (", 1.20ms each"),
// or "" where that is unknown (a pmx build that does not count it: -1) or there was none.
func eachCost(seconds float64, n int64) string {
	if seconds < 0 || n <= 0 {
		return ""
	}
	return ", " + formatUs(int64(math.Round(seconds/float64(n)*1e6))) + " each"
}

// asideAcquires gives the acquires made aside for accounts met while a batch committed, with what
// one took on average (", 12 aside for accounts met while a batch committed, 1.20ms each"), or ""
// where a pmx build does not count them.
func asideAcquires(c *ShardCounters) string {
	if c.Aside < 0 {
		return ""
	}
	return fmt.Sprintf(", %s aside for accounts met while a batch committed%s", formatCount(float64(c.Aside)), eachCost(c.AsideSeconds, c.Aside))
}

// countOrDash is a count, or "-" where it is unknown (-1).
func countOrDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return formatCount(float64(n))
}

// ofFloors is a run's orders/s as a percentage of the HTTP floor and its p50 as a multiple of the
// commit floor, "-" where either is unknown.
func (r *Result) ofFloors(x *RunResult) (ofHTTP, ofCommit string) {
	ofHTTP, ofCommit = "-", "-"
	f := r.Floors
	if x.Orders > 0 && f.HTTPRequestsPerSec > 0 {
		ofHTTP = strconv.FormatFloat(100*x.OrdersPerSec/f.HTTPRequestsPerSec, 'f', 1, 64) + "%"
	}
	if x.Orders > 0 && f.CommitP50Us > 0 {
		ofCommit = strconv.FormatFloat(float64(x.P50Us)/float64(f.CommitP50Us), 'f', 1, 64) + "×"
	}
	return ofHTTP, ofCommit
}

func latency(x *RunResult, us int64) string {
	if x.Orders == 0 && us == 0 {
		return "-"
	}
	return formatUs(us)
}

// formatUs prints a duration given in microseconds as the load generator prints latencies.
func formatUs(us int64) string { return loadgen.FormatLatency(time.Duration(us) * time.Microsecond) }

// formatUsFrac prints microseconds with one decimal, for the statements' times per order.
func formatUsFrac(us float64) string { return strconv.FormatFloat(us, 'f', 1, 64) + "µs" }

// formatCount prints a whole number with thousands separators (fractions are rounded).
func formatCount(f float64) string { return loadgen.FormatInt(int64(math.Round(f))) }

// formatRate prints a rate with thousands separators and one decimal.
func formatRate(f float64) string { return loadgen.FormatRate(f) }

// byProcess lists a run's pmx CPU per order by what each process runs, the costliest first.
func byProcess(x *RunResult) string {
	names := slices.Collect(maps.Keys(x.CPU.PMXByProcess))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(x.CPU.PMXByProcess[b], x.CPU.PMXByProcess[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + " " + formatUs(int64(math.Round(x.CPU.PMXByProcess[name]*1e6/float64(x.Orders))))
	}
	return strings.Join(parts, ", ")
}
