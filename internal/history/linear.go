package history

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// fillSlack widens a fill's window before its batch's time, for the rounding of timestamptz to
// microseconds and the clocks' noise.
const fillSlack = time.Millisecond

// linearizeTimeout bounds Porcupine's search for one order; an order's operations are few, and
// a search that times out is reported as unknown, not as a violation.
const linearizeTimeout = 10 * time.Second

// orderState is the model's state of one order.
type orderState struct {
	filled int64
	status string // the final status once the order is final, else ""
}

// orderInput is an operation on one order, as the model sees it.
type orderInput struct {
	fill   int64 // a fill of this quantity (a trade of the log)
	expect bool  // an answer or a read that shows the order's state (output: seen)
}

// linearizeOrder checks one order's history with Porcupine against a sequential model of its
// state: its filled quantity, and whether it is final (and in which status). The operations are
//
//   - every answer the history holds that shows the order (its placement's, a replay's, an amend's,
//     a cancel's, a read's), legal where its filled quantity is the model's and it is not open
//     while the model is final; a final one makes the model final;
//   - every trade of the log that fills it, as maker or as taker: legal only while it is not final,
//     and adding its quantity;
//   - its row at the end, after everything else.
//
// A trade's window is [its batch's time − fillSlack, the end of the run]: the batch's time is
// taken before the batch commits, on the clock of the exchange, which in these tests is the
// test's machine's; a fill can be seen no earlier than that, but can commit, and be seen, any time
// after it. So the window is sound, and still decisive where it matters: a trade timed after a
// client was answered a final state (a cancel's CANCELLED, say) cannot be placed before that
// answer, and after it the model refuses it. A test whose exchange runs on other machines needs
// a bound on their clocks' skew in fillSlack. What the model leaves free: an order may become
// final with no operation (an expiry, a self-trade cancel, an IOC's remainder), which an answer
// then shows; operations whose outcome is unknown are left out.
func linearizeOrder(r *row, obs []seen) porcupine.CheckResult {
	var ops []porcupine.Operation
	for _, s := range obs {
		ops = append(ops, porcupine.Operation{Input: orderInput{expect: true}, Output: orderState{s.filled, finalOf(s.status)},
			Call: s.op.Call.UnixNano(), Return: s.op.Return.UnixNano(), Metadata: s.op.String()})
	}
	end := int64(math.MaxInt64)
	for _, ts := range [][]*trade{r.taker, r.maker} {
		for _, t := range ts {
			ops = append(ops, porcupine.Operation{Input: orderInput{fill: t.quantity}, Call: t.at.Add(-fillSlack).UnixNano(), Return: end,
				Metadata: fmt.Sprintf("trade %s (seq %d) of %d at %v", t.id, t.seq, t.quantity, t.at)})
		}
	}
	ops = append(ops, porcupine.Operation{Input: orderInput{expect: true}, Output: orderState{r.filled, finalOf(r.status)},
		Call: end, Return: end, Metadata: "its row at the end"})
	for i := range ops {
		ops[i].ClientId = i
	}
	return porcupine.CheckOperationsTimeout(orderModel, ops, linearizeTimeout)
}

// finalOf is the model's status of an order's status: its final status, or "" while it is open.
func finalOf(status string) string {
	if final(status) {
		return status
	}
	return ""
}

var orderModel = porcupine.Model{
	Init: func() any { return orderState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(orderState), input.(orderInput)
		if !in.expect {
			if s.status != "" {
				return false, s // a fill of a final order
			}
			return true, orderState{s.filled + in.fill, ""}
		}
		out := output.(orderState)
		if out.filled != s.filled || s.status != "" && out.status != s.status {
			return false, s
		}
		return true, out
	},
	DescribeOperation: func(input, output any) string {
		if in := input.(orderInput); !in.expect {
			return fmt.Sprintf("fill %d", in.fill)
		}
		return fmt.Sprintf("shows %+v", output)
	},
}

// linearizable checks every order the history shows with Porcupine, and returns how many it
// checked and how many searches timed out.
func (c *checker) linearizable() (n, unknown int) {
	for r, obs := range c.observations() {
		n++
		switch linearizeOrder(r, obs) {
		case porcupine.Illegal:
			var ops string
			for _, s := range obs {
				ops += "\n\t" + s.op.String()
			}
			var ts string
			for _, t := range append(append([]*trade(nil), r.taker...), r.maker...) {
				ts += fmt.Sprintf("\n\ttrade %s (seq %d) of %d at %s", t.id, t.seq, t.quantity, t.at.Format("15:04:05.000000"))
			}
			c.fail("linearizable", r.id, "no order of its operations and trades fits the model (the row ends %s with %d filled); its answers:%s\nits trades:%s",
				r.status, r.filled, ops, ts)
		case porcupine.Unknown:
			unknown++
		}
	}
	return n, unknown
}
