package shardserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/shardproto"
)

// refuse answers a refused request: 400 in the API's error shape, with the refusal as the
// internal protocol carries it.
func refuse(c *gin.Context, e *domain.Error) {
	c.JSON(http.StatusBadRequest, shardproto.APIShape(shardproto.ErrorV1{Code: shardproto.CodeRefused, Refusal: shardproto.RefusalToV1(e)}, ""))
}

// badBody answers a body that is not the JSON the call takes.
func badBody(c *gin.Context, err error) {
	msg := "the body must be the call's JSON: " + err.Error()
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		msg = fmt.Sprintf("the body is larger than %d bytes", shardproto.MaxBody)
	}
	w := shardproto.APIShape(shardproto.ErrorV1{Code: "bad_request"}, msg)
	w.Details.Code = "malformed_json"
	c.JSON(http.StatusBadRequest, w)
}

// bind decodes a request body of at most MaxBody bytes into v, or answers 400.
func bind(c *gin.Context, v any) bool {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, shardproto.MaxBody)
	if err := c.ShouldBindJSON(v); err != nil {
		badBody(c, err)
		return false
	}
	return true
}

// bindMany decodes a many-at-once call's requests, from 1 to MaxMany, or answers 400.
func bindMany[T any](c *gin.Context, rs *[]T) bool {
	if !bind(c, rs) {
		return false
	}
	if len(*rs) == 0 || len(*rs) > shardproto.MaxMany {
		refuse(c, shardproto.Invalid("", "send from 1 to %d requests at once", shardproto.MaxMany))
		return false
	}
	return true
}

// splitValid checks each of rs: refuse is told each refused one's index, and ok are the others,
// in order, with idx their indexes in rs.
func splitValid[T any](rs []T, check func(*T) *domain.Error, refuse func(i int, e *domain.Error)) (ok []T, idx []int) {
	ok, idx = make([]T, 0, len(rs)), make([]int, 0, len(rs))
	for i := range rs {
		if e := check(&rs[i]); e != nil {
			refuse(i, e)
			continue
		}
		ok, idx = append(ok, rs[i]), append(idx, i)
	}
	return ok, idx
}
