package apiserver

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// The public reads of series (recurring markets, the MarketSeries resource): GET /series lists
// the series the operator records, newest first; GET /series/{id} reads one with its instances
// not settled yet, soonest to close first, which is how a bot finds the next market of a series.
// Both read Postgres alone, in either mode; a market's seriesId (GET /market, GET /markets) leads
// back to its series.

// Series and SeriesDetail are GET /series's and GET /series/{id}'s shapes (package apijson).
type (
	Series       = apijson.Series
	SeriesDetail = apijson.SeriesDetail
)

// listSeries lists series not ended, newest first (by createdAt), in cursor pages as GET /events
// does.
func (s *Server) listSeries(c *gin.Context) error {
	after, limit, err := queryPage(c, "GET /series", defaultMarkets, maxMarkets)
	if err != nil {
		return err
	}
	rows, err := s.cfg.Store.SeriesPage(c.Request.Context(), after, limit)
	if err != nil {
		return err
	}
	next := nextCursor(rows, limit, func(r *records.Series) store.Cursor { return store.Cursor{CreatedAt: r.CreatedAt, ID: r.ID} })
	c.JSON(http.StatusOK, gin.H{"series": listOf(rows, apijson.SeriesOf), "nextCursor": next})
	return nil
}

var errSeriesNotFound = &httpkit.Error{Status: http.StatusNotFound, Code: "series_not_found", Field: "id",
	Message: "no series has this id: GET /series lists them"}

// getSeries reads one series, ended or not, with its instances not settled yet.
func (s *Server) getSeries(c *gin.Context) error {
	id, err := parseUUID("id", c.Param("id"))
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	row, err := s.cfg.Store.Series(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return errSeriesNotFound
	}
	if err != nil {
		return err
	}
	instances, err := s.cfg.Store.SeriesInstances(ctx, row)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, apijson.SeriesDetailOf(&row, instances))
	return nil
}
