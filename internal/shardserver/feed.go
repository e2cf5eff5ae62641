package shardserver

import (
	"bufio"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	json "github.com/goccy/go-json"

	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/shardproto"
)

// streamFeed writes the shard's committed batches to one front until it goes away or falls
// behind, or the shard stops.
func streamFeed(bus *feed.Bus, stopping <-chan struct{}) gin.HandlerFunc {
	return func(c *gin.Context) {
		if bus == nil {
			c.JSON(http.StatusNotFound, shardproto.ErrorV1{Code: "no_feed"})
			return
		}
		sub := bus.Subscribe(shardproto.FeedStreamSize)
		defer sub.Close()
		rc := http.NewResponseController(c.Writer)
		_ = rc.SetWriteDeadline(time.Time{}) // the stream lasts; its writes are bounded below
		c.Header("Content-Type", "application/x-ndjson")
		c.Status(http.StatusOK)
		keepalive := time.NewTicker(shardproto.FeedKeepalive)
		defer keepalive.Stop()
		w := bufio.NewWriterSize(c.Writer, 64<<10)
		flush := func() bool {
			_ = rc.SetWriteDeadline(time.Now().Add(shardproto.FeedSilence))
			if w.Flush() != nil || rc.Flush() != nil {
				return false
			}
			return true
		}
		if !flush() {
			return
		}
		for {
			select {
			case b := <-sub.C():
				for more := true; more; {
					line, err := b.Wire(feedLine)
					if err != nil {
						return
					}
					_, _ = w.Write(line)
					_ = w.WriteByte('\n')
					select { // what else is waiting goes in the same write
					case b = <-sub.C():
					default:
						more = false
					}
				}
				if !flush() {
					return
				}
			case <-keepalive.C:
				_ = w.WriteByte('\n')
				if !flush() {
					return
				}
			case <-sub.Lost():
				return // fell behind: the front reconnects and fills the gap
			case <-stopping:
				return
			case <-c.Request.Context().Done():
				return
			}
		}
	}
}

// feedLine is a batch's line of the feed stream, without its newline.
func feedLine(b feed.Batch) ([]byte, error) { return json.Marshal(shardproto.FeedBatchToV1(b)) }
