package shard

import (
	"context"
	"time"
)

// Registration keeps a named shard registered: a heartbeat in Postgres every Interval, and after
// each one the set of markets it holds brought in line with those recorded as its own.
type Registration struct {
	// Address is where the front API reaches this shard's internal HTTP API.
	Address  string
	Interval time.Duration // default 1s
}

// Run heartbeats until ctx ends, then unregisters the shard so that its markets move at once.
func (s *Shard) Run(ctx context.Context, reg Registration) {
	interval := reg.Interval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.beat(ctx, reg.Address)
		select {
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.cfg.Store.Unregister(stopCtx, s.cfg.Name); err != nil {
				s.log.Warn("could not unregister", "err", err)
			}
			return
		case <-t.C:
		}
	}
}

func (s *Shard) beat(ctx context.Context, address string) {
	if err := s.cfg.Store.Heartbeat(ctx, s.cfg.Name, address); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("heartbeat failed", "err", err)
		}
		return
	}
	owned, err := s.cfg.Store.OwnedMarkets(ctx, s.cfg.Name)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("could not read the markets assigned here", "err", err)
		}
		return
	}
	if err := s.do(ctx, &command{kind: cmdSync, owned: owned}); err != nil && ctx.Err() == nil {
		s.log.Warn("could not load the markets assigned here", "err", err)
	}
}
