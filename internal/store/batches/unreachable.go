package batches

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// A database failover (the primary lost, a standby promoted) shows itself to pmx as connections
// that break, refuse or reach a server that is no longer the primary. Every process keeps running
// through it: the pool replaces broken connections with ones to whichever host of the URL is the
// primary now (target_session_attrs=read-write), and meanwhile what needed the database answers
// 503, saying whether anything may have been done (docs/operations.md, "Database high
// availability").

// ErrCommitUnknown is wrapped by CommitBatch when the batch's COMMIT was sent and the connection
// failed before its answer came: Postgres may have committed the batch or not, and only reading
// what it holds (from the new primary, once there is one) tells.
var ErrCommitUnknown = errors.New("the connection to the database failed after the batch's commit was sent, before its answer: it may have been committed")

// commitOutcomeUnknown reports whether err, the failure of a round trip that carried a COMMIT,
// leaves the commit's outcome unknown: the server answered nothing that says it rolled back (an
// error from the server means the transaction failed), and pgx did not report that nothing was
// sent.
func commitOutcomeUnknown(err error) bool {
	var pg *pgconn.PgError
	return err != nil && !errors.As(err, &pg) && !pgconn.SafeToRetry(err)
}

// Unreachable reports whether err says the database could not be reached or is not the primary
// (connection refused or broken, the server shutting down or starting, a read-only standby): a
// failover or a restart under way, after which the same request may succeed. A server that
// refuses a new connection because it has max_connections already (too_many_connections) counts
// too: nothing was done, and the same request succeeds once a connection is free (docs/
// operations.md, "Database connections").
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case len(pg.Code) == 5 && pg.Code[:2] == "08": // connection_exception
			return true
		case pg.Code == "57P01", pg.Code == "57P02", pg.Code == "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		case pg.Code == "25006": // read_only_sql_transaction: a standby
			return true
		case pg.Code == "53300": // too_many_connections: refused at connect, nothing was sent
			return true
		}
		return false
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	return errors.Is(err, ErrCommitUnknown) || errors.As(err, &connect) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) && !errors.Is(err, context.Canceled)
}
