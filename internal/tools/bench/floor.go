package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

// The HTTP floor: what this machine can do for HTTP alone, with the load generator's client and
// pmx's server framework, when the server does no work at all. Any exchange built on HTTP/1.1
// request-response over loopback on the same cores pays at least this per request, so it bounds
// what the whole exchange can reach here.

// floorAnswer is what the floor server answers every request with: a placement's answer as pmx
// writes it, with no fill (~300 bytes).
var floorAnswer = []byte(`{"id":"019a8b3c-7e2f-7a10-8b5c-3d2e1f0a9b8c","marketId":"019a8b3c-7e2f-7a10-8b5c-000000000001",` +
	`"side":"BUY","outcome":"YES","price":42,"quantity":10,"filledQuantity":0,"status":"OPEN",` +
	`"createdAt":"2026-11-21T08:00:00.123456Z","updatedAt":"2026-11-21T08:00:00.123456Z","trades":[]}`)

// floorRequest is what each bot sends: a placement's body.
var floorRequest = []byte(`{"marketId":"019a8b3c-7e2f-7a10-8b5c-000000000001","side":"BUY","outcome":"YES","price":42,"quantity":10}`)

// FloorServe serves the floor server on addr until ctx ends: gin with one route, POST
// /api/v1/order, that reads the body and answers floorAnswer. It writes "listening on ADDR" to out
// once it accepts connections.
func FloorServe(ctx context.Context, addr string, out io.Writer) error {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/api/v1/order", func(c *gin.Context) {
		if _, err := io.Copy(io.Discard, c.Request.Body); err != nil {
			c.Status(http.StatusBadRequest)
			return
		}
		c.Data(http.StatusCreated, "application/json; charset=utf-8", floorAnswer)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Fprintf(out, "listening on %s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// FloorOptions configures Floor.
type FloorOptions struct {
	Server   string // the binary to run `bench http --serve` from: pmxtools, which serves it
	Bots     int
	Duration time.Duration
}

// FloorResult is what Floor measured.
type FloorResult struct {
	Bots           int           `json:"bots"`
	Duration       time.Duration `json:"duration"`
	Requests       int64         `json:"requests"`
	RequestsPerSec float64       `json:"requestsPerSecond"`
	ClientCPU      time.Duration `json:"clientCPUPerRequest"` // this process, per request
	ServerCPU      time.Duration `json:"serverCPUPerRequest"` // the server process, per request
	Cores          float64       `json:"cores"`               // client + server CPU seconds per second
}

// Floor starts the floor server as a child process and drives it closed loop with o.Bots bots
// for o.Duration, with loadgen's HTTP client.
func Floor(ctx context.Context, o FloorOptions) (*FloorResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.Server, "bench", "http", "--serve", "127.0.0.1:0")
	cmd.Env = cleanEnv()
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("while starting the floor server: %w", err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		return nil, fmt.Errorf("the floor server did not start: %q %v", line, err)
	}

	proc := newProcFS()
	hc := loadgen.NewHTTPClient(o.Bots, 10*time.Second)
	defer hc.CloseIdleConnections()
	url := "http://" + addr + "/api/v1/order"
	var n atomic.Int64
	var failure atomic.Value
	runCtx, stop := context.WithTimeout(ctx, o.Duration)
	defer stop()
	serverBefore, err := proc.ownCPU(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	clientBefore, err := proc.ownCPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range o.Bots {
		wg.Go(func() {
			var buf bytes.Buffer
			for runCtx.Err() == nil {
				req, _ := http.NewRequestWithContext(runCtx, http.MethodPost, url, bytes.NewReader(floorRequest))
				req.Header["Authorization"] = []string{"Bearer pmx_floorfloorfloorfloorfloorfloor"}
				req.Header["Content-Type"] = []string{"application/json"}
				resp, err := hc.Do(req)
				if err != nil {
					if runCtx.Err() == nil {
						failure.CompareAndSwap(nil, err)
					}
					return
				}
				buf.Reset()
				_, err = buf.ReadFrom(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == http.StatusCreated {
					n.Add(1)
				} else if runCtx.Err() == nil {
					failure.CompareAndSwap(nil, fmt.Errorf("HTTP %d, %v", resp.StatusCode, err))
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failure.Load().(error); err != nil {
		return nil, fmt.Errorf("a floor request failed: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	serverAfter, err := proc.ownCPU(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	clientAfter, err := proc.ownCPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	r := &FloorResult{Bots: o.Bots, Duration: elapsed, Requests: n.Load()}
	if r.Requests == 0 {
		return nil, errors.New("no floor request was answered")
	}
	r.RequestsPerSec = float64(r.Requests) / elapsed.Seconds()
	r.ClientCPU = (clientAfter - clientBefore) / time.Duration(r.Requests)
	r.ServerCPU = (serverAfter - serverBefore) / time.Duration(r.Requests)
	r.Cores = (clientAfter - clientBefore + serverAfter - serverBefore).Seconds() / elapsed.Seconds()
	return r, nil
}

// WriteText prints the result as a short table.
func (r *FloorResult) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "HTTP floor: %d bots, closed loop, %s, a server that does nothing\n\n"+
		"%12s  %14s  %14s  %6s\n%12s  %14s  %14s  %6.2f\n",
		r.Bots, r.Duration.Round(time.Millisecond),
		"requests/s", "client CPU/req", "server CPU/req", "cores",
		formatCount(r.RequestsPerSec), loadgen.FormatLatency(r.ClientCPU), loadgen.FormatLatency(r.ServerCPU), r.Cores)
	return err
}
