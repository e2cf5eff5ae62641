package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"time"

	"github.com/gin-gonic/gin"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// OpenAccount is the one way an account is opened, for the admin API and the settings pages'
// sign-up alike: it checks the name and opens the account with the configured grant. passwordHash
// (auth.HashPassword) lets the account sign in to the settings pages; accounts opened without one
// (the admin API's) have no web sign-in.
func (s *Server) OpenAccount(ctx context.Context, name, passwordHash string) (records.Account, error) {
	if err := auth.CheckAccountName(name); err != nil {
		return records.Account{}, httpkit.FieldError("name", "invalid_value", "%s", err.Error())
	}
	a, err := s.cfg.Store.CreateAccountWithPassword(ctx, name, s.cfg.Grant, passwordHash, s.now())
	if errors.Is(err, store.ErrConflict) {
		return a, &httpkit.Error{Status: http.StatusConflict, Code: "name_taken", Field: "name", Message: "this name is taken; choose another"}
	}
	return a, err
}

func (s *Server) createAccount(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	name, err := obj.string("name")
	if err != nil {
		return err
	}
	spec, err := s.keySpec(obj) // checked before the account is opened: a refusal opens nothing
	if err != nil {
		return err
	}
	// Opened without a password, so without web sign-in, and with a first API key.
	a, err := s.OpenAccount(c.Request.Context(), name, "")
	if err != nil {
		return err
	}
	key, err := s.NewAPIKey(c.Request.Context(), a.ID, spec)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, gin.H{"account": accountOfRow(&a), "apiKey": key})
	return nil
}

// marketBody is the admin API's market: the fields of a Market's spec.
type marketBody struct {
	Question    string     `json:"question"`
	Description string     `json:"description"`
	Category    string     `json:"category"`
	URL         string     `json:"url"`
	LabelA      string     `json:"labelA"`
	LabelB      string     `json:"labelB"`
	ClosesAt    *time.Time `json:"closesAt"`
	ResolvesAt  *time.Time `json:"resolvesAt"`
}

// marketFields are the JSON names of marketBody's fields.
var marketFields = jsonNames(reflect.TypeFor[marketBody]())

func (s *Server) createMarket(c *gin.Context) error {
	if s.operatorManaged() {
		return exchange.ErrManagedByOperator
	}
	body, err := readBody(c.Request)
	if err != nil {
		return err
	}
	spec, err := decodeMarket(body)
	if err != nil {
		return err
	}
	m, err := marketspec.Create(c.Request.Context(), s.cfg.Store, spec, nil, s.now())
	if err != nil {
		return marketSpecError(err)
	}
	c.JSON(http.StatusCreated, MarketOf(&m))
	return nil
}

// operatorManaged reports whether markets and events are Market and Event resources here (the
// distributed front), which the admin API must not create.
func (s *Server) operatorManaged() bool { return s.cfg.Exchange.ManagedByOperator() }

// decodeMarket decodes a market body and checks it by the Market resource's rules
// (marketspec.Validate), defaulted as the CRD defaults it.
func decodeMarket(body []byte) (v1alpha1.MarketSpec, error) {
	o, err := decodeObject(body)
	if err != nil {
		return v1alpha1.MarketSpec{}, err
	}
	if err := o.oneKeyPerField(marketFields); err != nil {
		return v1alpha1.MarketSpec{}, err
	}
	var b marketBody
	if err := json.Unmarshal(body, &b); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return v1alpha1.MarketSpec{}, httpkit.FieldError(typ.Field, "invalid_type", "%s must be a %s", typ.Field, typ.Type.String())
		}
		return v1alpha1.MarketSpec{}, httpkit.FieldError("", "invalid_value", "%v (times are RFC 3339, like 2027-01-31T18:00:00Z)", err)
	}
	spec := v1alpha1.MarketSpec{Question: b.Question, Description: b.Description, Category: b.Category,
		URL: b.URL, LabelA: b.LabelA, LabelB: b.LabelB, ClosesAt: metaTime(b.ClosesAt), ResolvesAt: metaTime(b.ResolvesAt)}
	return spec, marketSpecError(marketspec.Validate(&spec))
}

// marketSpecError is a spec the Market's rules refuse (*marketspec.SpecError) as the API's error; any
// other error as it is.
func marketSpecError(err error) error {
	var se *marketspec.SpecError
	if errors.As(err, &se) {
		return httpkit.FieldError(se.Field, se.Code, "%v", se.Err)
	}
	return err
}

func metaTime(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	m := metav1.NewTime(*t)
	return &m
}

func (s *Server) transition(action domain.MarketAction) func(*gin.Context) error {
	return func(c *gin.Context) error { return s.apply(c, action) }
}

func (s *Server) resolve(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	outcome, err := obj.string("outcome")
	if err != nil {
		return err
	}
	action, err := market.Resolve(outcome)
	if err != nil {
		return httpkit.FieldError("outcome", "invalid_value", "outcome must be YES or NO")
	}
	return s.apply(c, action)
}

func (s *Server) apply(c *gin.Context, action domain.MarketAction) error {
	id, err := parseUUID("id", c.Param("id"))
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if err := s.cfg.Exchange.Transition(ctx, id, action); err != nil {
		if errors.Is(err, domain.ErrUnknownMarket) {
			return &httpkit.Error{Status: http.StatusNotFound, Code: "market_not_found", Field: "id", Message: "no market has this id"}
		}
		return err
	}
	m, err := s.cfg.Store.Market(ctx, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, MarketOf(&m))
	return nil
}

// KeyRevoked forgets a revoked key at once (other replicas hear of it from Postgres).
func (s *Server) KeyRevoked(prefix string) { s.keys.revoke(prefix) }
