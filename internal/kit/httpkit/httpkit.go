// Package httpkit is what pmx's two HTTP faces share — the public front (package apiserver) and a
// shard's internal API (package shardserver): gin's JSON codec (json.go), bearer-token parsing, the
// error type and body every public error answer has, request metrics, the health endpoints, and
// the /metrics handler that every process serves on a listener of its own.
package httpkit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// Bearer returns the token of an "Authorization: Bearer <token>" header.
func Bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// Error is an API error: its status, a stable snake_case code, the field at fault if any, and a
// sentence for humans saying what was wrong and what to do.
type Error struct {
	Status  int
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// NewError is an Error with a formatted message.
func NewError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldError is a 400 naming the field at fault.
func FieldError(field, code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorBody is the JSON shape of every error answer (docs/architecture.md §2).
type ErrorBody struct {
	Error   string       `json:"error"`
	Details ErrorDetails `json:"details"`
}

// ErrorDetails are an error answer's machine-readable parts.
type ErrorDetails struct {
	Code  string `json:"code"`
	Field string `json:"field,omitempty"`
}

// Abort answers e and stops the handler chain. A 401 also names the scheme to authenticate with.
func Abort(c *gin.Context, e *Error) {
	if e.Status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="pmx"`)
	}
	c.AbortWithStatusJSON(e.Status, ErrorBody{Error: e.Message, Details: ErrorDetails{Code: e.Code, Field: e.Field}})
}

// AbortUnread answers e to a request whose body the server has not read (one refused on its
// headers: no or a bad credential, no such route), and closes the connection after the answer
// without reading the rest of the body. Otherwise the server would read it first, to keep the
// connection alive, and a client sending it a byte at a time could hold the connection, and the
// answer, for as long as the read limit.
func AbortUnread(c *gin.Context, e *Error) {
	CloseUnread(c)
	Abort(c, e)
}

// CloseUnread, called before answering a request whose body has not been read, makes the server
// close the connection after the answer instead of reading the body first (see AbortUnread).
func CloseUnread(c *gin.Context) {
	if c.Request.ContentLength != 0 {
		c.Header("Connection", "close")
		// Ends the read of the rest of the body at once; no error when the writer cannot.
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
	}
}

// answerUnwritten answers a request whose handler chose its answer but gin could not write it (a
// body that cannot be encoded as JSON, such as a time past year 9999: gin records the error and
// writes nothing) with a 500 and an error body, and logs it. Without it the request would end as
// a 200 with an empty body, which a client cannot tell from an empty answer.
func answerUnwritten(c *gin.Context) {
	if c.Writer.Written() || len(c.Errors) == 0 {
		return
	}
	Logger(c).Error("the answer could not be written", "method", c.Request.Method, "path", c.Request.URL.Path,
		"status", c.Writer.Status(), "err", c.Errors.Last().Err)
	Abort(c, NewError(http.StatusInternalServerError, "internal", "the exchange failed to answer; try again later"))
}

// loggerKey is where WithLogger leaves the request's logger in the gin context.
const loggerKey = "logger"

// WithLogger is middleware that gives every request log (Logger) and logs each request once it is
// answered: at debug level, or warning for a 5xx.
func WithLogger(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Set(loggerKey, log)
		c.Next()
		status := c.Writer.Status()
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelWarn
		}
		if ctx := c.Request.Context(); log.Enabled(ctx, level) { // spare the arguments' allocations
			log.Log(ctx, level, "request", "method", c.Request.Method, "path", c.Request.URL.Path,
				"status", status, "duration", time.Since(start))
		}
	}
}

// Logger is the request's logger (see WithLogger), or slog's default.
func Logger(c *gin.Context) *slog.Logger {
	if l, ok := c.Get(loggerKey); ok {
		return l.(*slog.Logger)
	}
	return slog.Default()
}

// Pinger is what readiness checks: the database.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Health adds /healthz (the process answers) and /readyz (and it reaches the database, within 2s).
func Health(e *gin.Engine, db Pinger) {
	e.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			c.String(http.StatusServiceUnavailable, "database unreachable\n")
			return
		}
		c.String(http.StatusOK, "ok\n")
	})
}
