package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// With Options.Statements the bench's Postgres loads pg_stat_statements, and each run reports the
// statements that took most of Postgres's execution time, per order: which part of the work a
// change made cheaper or dearer, which orders/s alone cannot say (docs/performance.md, "Statement
// by statement, on 2 cores"). Like orders/s it moves with the machine's speed: compare builds
// alternated in one sitting.

// statementsShown is how many kinds of statement a run's report lists, the costliest first.
const statementsShown = 8

// Statements is where a run's Postgres statement execution time went.
type Statements struct {
	// ExecUsPerOrder is the execution time of every statement the run's clients sent, per order.
	ExecUsPerOrder float64 `json:"execUsPerOrder"`
	// Top are the kinds of statement that took most of it, the costliest first.
	Top []Statement `json:"top"`
}

// Statement is one kind of statement of a run: a batch's write statement is named by its parts
// (the names of its common table expressions, e.g. "cash+new_account_events"), any other by its
// first words as pg_stat_statements normalized them.
type Statement struct {
	Kind           string  `json:"kind"`
	Calls          int64   `json:"calls"`
	Rows           int64   `json:"rows"`
	ExecUsPerOrder float64 `json:"execUsPerOrder"`
	ExecUsPerCall  float64 `json:"execUsPerCall"`
}

// statementSettings loads pg_stat_statements into a cluster, counting the statements clients send
// (not those functions run inside them, which their callers' times already hold).
var statementSettings = map[string]string{
	"shared_preload_libraries":         "pg_stat_statements",
	"pg_stat_statements.track":         "top",
	"pg_stat_statements.max":           "1000",
	"pg_stat_statements.save":          "off",
	"pg_stat_statements.track_utility": "off",
}

// startStatements creates the extension in the bench's database (its cluster must have loaded it:
// statementSettings) and forgets what was counted so far.
func (p *pgStats) startStatements(ctx context.Context) error {
	if _, err := p.conn.Exec(ctx, `create extension if not exists pg_stat_statements`); err != nil {
		return fmt.Errorf("while creating pg_stat_statements: %w", err)
	}
	return p.resetStatements(ctx)
}

func (p *pgStats) resetStatements(ctx context.Context) error {
	if _, err := p.conn.Exec(ctx, `select pg_stat_statements_reset()`); err != nil {
		return fmt.Errorf("while resetting pg_stat_statements: %w", err)
	}
	return nil
}

// statements reads what pg_stat_statements counted since the reset, per order of orders.
func (p *pgStats) statements(ctx context.Context, orders int64) (*Statements, error) {
	rows, err := p.conn.Query(ctx, `select query, calls, rows, total_exec_time from pg_stat_statements
		where dbid = (select oid from pg_database where datname = current_database())
		  and userid = (select oid from pg_roles where rolname = current_user)
		  and query not like '%pg_stat_statements%'`)
	if err != nil {
		return nil, fmt.Errorf("while reading pg_stat_statements: %w", err)
	}
	defer rows.Close()
	type kind struct {
		calls, rows int64
		us          float64 // execution time, all calls together
	}
	byKind := map[string]*kind{}
	var totalUs float64
	for rows.Next() {
		var query string
		var calls, n int64
		var ms float64
		if err := rows.Scan(&query, &calls, &n, &ms); err != nil {
			return nil, fmt.Errorf("while reading pg_stat_statements: %w", err)
		}
		name := statementKind(query)
		k := byKind[name]
		if k == nil {
			k = &kind{}
			byKind[name] = k
		}
		k.calls, k.rows, k.us = k.calls+calls, k.rows+n, k.us+ms*1000
		totalUs += ms * 1000
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("while reading pg_stat_statements: %w", err)
	}
	perOrder := func(us float64) float64 {
		if orders <= 0 {
			return 0
		}
		return us / float64(orders)
	}
	names := slices.SortedFunc(maps.Keys(byKind), func(a, b string) int {
		return cmp.Or(cmp.Compare(byKind[b].us, byKind[a].us), strings.Compare(a, b))
	})
	out := &Statements{ExecUsPerOrder: perOrder(totalUs)}
	for _, name := range names[:min(len(names), statementsShown)] {
		k := byKind[name]
		out.Top = append(out.Top, Statement{Kind: name, Calls: k.calls, Rows: k.rows,
			ExecUsPerOrder: perOrder(k.us), ExecUsPerCall: k.us / float64(max(k.calls, 1))})
	}
	return out, nil
}

var ctePart = regexp.MustCompile(`(?i)\b(\w+)\s+as\s+(?:(?:not\s+)?materialized\s+)?\(`)

// statementKind names a statement for the report: a batch's write statement (one that starts with
// WITH) by the names of its parts, joined by "+"; any other by its first 60 characters, its
// white space made single spaces.
func statementKind(query string) string {
	q := strings.Join(strings.Fields(query), " ")
	if len(q) >= 5 && strings.EqualFold(q[:5], "with ") {
		var parts []string
		for _, m := range ctePart.FindAllStringSubmatch(q, -1) {
			parts = append(parts, m[1])
		}
		if len(parts) > 0 {
			return strings.Join(parts, "+")
		}
	}
	if len(q) > 60 {
		q = q[:60] + "…"
	}
	return q
}
