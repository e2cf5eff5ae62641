package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/engine"
)

func newDemoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Trade a few orders through the matching engine and show what happened",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.OutOrStdout())
		},
	}
}

// runDemo walks one market through the four kinds of match, self-trade prevention and a cancel,
// printing each order's fills and the book afterwards.
func runDemo(w io.Writer) error {
	names := map[engine.AccountID]string{1: "alice", 2: "bob", 3: "carol"}
	steps := []struct {
		note string
		o    engine.Order
	}{
		{"alice bids for YES", engine.Order{Account: 1, Side: engine.Buy, Outcome: engine.Yes, Price: 60, Quantity: 10}},
		{"bob buys NO at 40: mints 10 pairs with alice", engine.Order{Account: 2, Side: engine.Buy, Outcome: engine.No, Price: 40, Quantity: 10}},
		{"alice offers 6 of her YES shares", engine.Order{Account: 1, Side: engine.Sell, Outcome: engine.Yes, Price: 65, Quantity: 6}},
		{"carol buys YES up to 70: takes alice's 6 at 65, rests 4", engine.Order{Account: 3, Side: engine.Buy, Outcome: engine.Yes, Price: 70, Quantity: 10}},
		{"bob sells NO at 30, a YES bid at 70 behind carol's", engine.Order{Account: 2, Side: engine.Sell, Outcome: engine.No, Price: 30, Quantity: 4}},
		{"carol sells her YES at 55: her own bid is cancelled, 4 pairs burn with bob", engine.Order{Account: 3, Side: engine.Sell, Outcome: engine.Yes, Price: 55, Quantity: 6}},
		{"bob offers NO at 50, a YES bid at 50", engine.Order{Account: 2, Side: engine.Sell, Outcome: engine.No, Price: 50, Quantity: 3}},
		{"alice buys NO up to 52: takes bob's NO at 50", engine.Order{Account: 1, Side: engine.Buy, Outcome: engine.No, Price: 52, Quantity: 3}},
		{"alice bids for YES at 45", engine.Order{Account: 1, Side: engine.Buy, Outcome: engine.Yes, Price: 45, Quantity: 5}},
	}
	book := engine.New(16)
	var r engine.Result
	for i, s := range steps {
		s.o.ID = engine.OrderID(i + 1)
		if err := book.Submit(s.o, &r); err != nil {
			return fmt.Errorf("while submitting %q: %w", s.note, err)
		}
		fmt.Fprintf(w, "#%d %s\n   %s %s %s @%d ×%d → %s, filled %d\n", s.o.ID, s.note, names[s.o.Account],
			s.o.Side, s.o.Outcome, s.o.Price, s.o.Quantity, r.Order.Status, r.Order.Filled)
		for _, f := range r.Fills {
			fmt.Fprintf(w, "   fill %-12s %3d @ YES %d: %s %s %s @%d, %s %s %s @%d\n", f.Kind, f.Quantity, f.YesPrice,
				names[f.Taker.Account], f.Taker.Side, f.Taker.Outcome, f.Taker.Price,
				names[f.Maker.Account], f.Maker.Side, f.Maker.Outcome, f.Maker.Price)
		}
		for _, c := range r.Cancelled {
			fmt.Fprintf(w, "   self-trade prevention cancelled #%d (%s)\n", c.ID, c.Status)
		}
	}
	var d engine.Depth
	book.Depth(10, &d)
	fmt.Fprintln(w, "\nOrder book")
	printView(w, "YES", &d.Yes)
	printView(w, "NO", &d.No)
	return nil
}

func printView(w io.Writer, name string, v *engine.View) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s (last trade %d)\tprice\tquantity\ttotal\n", name, v.LastTradePrice)
	for i := len(v.Asks) - 1; i >= 0; i-- {
		fmt.Fprintf(tw, "  ask\t%d\t%d\t%d\n", v.Asks[i].Price, v.Asks[i].Quantity, v.Asks[i].Total)
	}
	for _, l := range v.Bids {
		fmt.Fprintf(tw, "  bid\t%d\t%d\t%d\n", l.Price, l.Quantity, l.Total)
	}
	tw.Flush()
}
