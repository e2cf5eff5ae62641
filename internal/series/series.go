// Package series holds the rules of recurring markets (the MarketSeries resource,
// api/v1alpha1): reading a series' schedule in its time zone, which instances must exist at a
// given time, each instance's name, times and spec, and which settled instances may go. The
// operator's MarketSeries controller (controllers/) links it; it decides nothing from memory, so
// that what a series lists follows from its spec and the clock alone — the same after a restart,
// a leader change or downtime (docs/architecture.md §6, "A series").
//
// Schedules are parsed by github.com/robfig/cron/v3, restricted to five fields and the calendar
// descriptors: @every and a CRON_TZ= prefix are refused, since an instance's time must follow from
// the schedule and the time zone alone.
package series

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
)

// NameLayout is the suffix an instance's name takes from its time in the series' zone:
// <series>-<yyyymmdd>-<hhmm>.
const NameLayout = "20060102-1504"

// MaxDue is the most instances a series may need at once (those open now and those listed
// ahead); a schedule and closesAfter that ask for more are refused rather than listed in part.
const MaxDue = 200

// parser reads the five standard fields and the calendar descriptors (@daily, ...). @every is
// refused by New: its times follow from when it is asked, not from the calendar.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Series is a MarketSeries' spec read and checked: its schedule in its zone, its offsets and
// its retention.
type Series struct {
	Name          string
	schedule      *cron.SpecSchedule
	loc           *time.Location
	closesAfter   time.Duration
	resolvesAfter *time.Duration
	keepListed    int
	keepSettled   time.Duration
	spec          v1alpha1.MarketSeriesSpec
}

// Error is a series whose spec cannot be followed; Field is the spec's field at fault.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return "spec." + e.Field + ": " + e.Message }

// New reads a MarketSeries' spec under its name, with the CRD's defaults for what is unset. The
// error, an *Error, names the field and says what to write instead.
func New(name string, spec v1alpha1.MarketSeriesSpec) (*Series, error) {
	s := &Series{Name: name, spec: spec, keepListed: v1alpha1.DefaultSeriesKeepListed}
	if len(name) > v1alpha1.MaxSeriesNameLength {
		return nil, &Error{"name", fmt.Sprintf("%q is %d characters; at most %d, so that its instances' names (with -yyyymmdd-hhmm) fit 63", name, len(name), v1alpha1.MaxSeriesNameLength)}
	}
	expr := strings.TrimSpace(spec.Schedule)
	switch {
	case expr == "":
		return nil, &Error{"schedule", "required: five cron fields such as \"0 18 * * *\", or @daily"}
	case strings.HasPrefix(expr, "@every"):
		return nil, &Error{"schedule", fmt.Sprintf("%q: @every is not a calendar schedule; write five cron fields, e.g. \"0 * * * *\" for every hour", expr)}
	case strings.Contains(expr, "="):
		return nil, &Error{"schedule", fmt.Sprintf("%q: give the time zone in spec.timeZone, not in the schedule", expr)}
	}
	parsed, err := parser.Parse(expr)
	if err != nil {
		return nil, &Error{"schedule", fmt.Sprintf("%q: %v; write five cron fields (minute hour day-of-month month day-of-week), e.g. \"0 18 * * *\"", expr, err)}
	}
	sched, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, &Error{"schedule", fmt.Sprintf("%q is not a calendar schedule", expr)}
	}
	zone := spec.TimeZone
	if zone == "" {
		zone = v1alpha1.DefaultSeriesTimeZone
	}
	if s.loc, err = time.LoadLocation(zone); err != nil || zone == "Local" {
		return nil, &Error{"timeZone", fmt.Sprintf("%q is not a time zone this build knows; use an IANA name such as \"Europe/Paris\" or \"UTC\"", zone)}
	}
	copied := *sched
	copied.Location = s.loc
	s.schedule = &copied
	if spec.ClosesAfter != nil {
		s.closesAfter = spec.ClosesAfter.Duration
	}
	if s.closesAfter < 0 {
		return nil, &Error{"closesAfter", "must be 0s or more"}
	}
	if spec.ResolvesAfter != nil {
		d := spec.ResolvesAfter.Duration
		if d <= s.closesAfter {
			return nil, &Error{"resolvesAfter", fmt.Sprintf("%s must be longer than closesAfter (%s): an instance resolves after it closes", d, s.closesAfter)}
		}
		s.resolvesAfter = &d
	}
	if spec.KeepListed != nil {
		s.keepListed = int(*spec.KeepListed)
	}
	if s.keepListed < 0 || s.keepListed > v1alpha1.MaxSeriesKeepListed {
		return nil, &Error{"keepListed", fmt.Sprintf("%d: must be from 0 to %d", s.keepListed, v1alpha1.MaxSeriesKeepListed)}
	}
	s.keepSettled, _ = time.ParseDuration(v1alpha1.DefaultSeriesKeepSettledFor)
	if spec.KeepSettledFor != nil {
		s.keepSettled = spec.KeepSettledFor.Duration
	}
	if s.keepSettled < 0 {
		return nil, &Error{"keepSettledFor", "must be 0s or more"}
	}
	if (spec.Market == nil) == (spec.Event == nil) {
		return nil, &Error{"market", "set exactly one of market and event: the template of each instance"}
	}
	// Each instance's, checked here under the series' own fields rather than as the template's.
	if err := v1alpha1.CheckShardPool(spec.ShardPool); err != nil {
		return nil, &Error{"shardPool", err.Error()}
	}
	if err := spec.Placement.Check(); err != nil {
		return nil, &Error{"placement", err.Error()}
	}
	// The template must make a valid instance; its first time will do.
	if first := s.schedule.Next(time.Unix(0, 0)); first.IsZero() {
		return nil, &Error{"schedule", fmt.Sprintf("%q never falls; check its day of month and month", expr)}
	}
	if err := s.checkTemplate(); err != nil {
		return nil, err
	}
	return s, nil
}

// Location is the series' time zone.
func (s *Series) Location() *time.Location { return s.loc }

// KeepSettled is how long a settled instance is kept as a resource.
func (s *Series) KeepSettled() time.Duration { return s.keepSettled }

// IsEvent reports whether the series lists Events (else Markets).
func (s *Series) IsEvent() bool { return s.spec.Event != nil }

// Instance is one instance of a series: its name, its scheduled time and the times that follow.
type Instance struct {
	Name       string
	Time       time.Time // in the series' zone
	ClosesAt   time.Time
	ResolvesAt *time.Time
}

// InstanceAt is the series' instance of scheduled time t.
func (s *Series) InstanceAt(t time.Time) Instance {
	t = t.In(s.loc)
	in := Instance{Name: s.Name + "-" + t.Format(NameLayout), Time: t, ClosesAt: t.Add(s.closesAfter)}
	if s.resolvesAfter != nil {
		r := t.Add(*s.resolvesAfter)
		in.ResolvesAt = &r
	}
	return in
}

// Plan is what a series must list at one time.
type Plan struct {
	// Due are the instances that must exist, earliest first: every one whose time has come and
	// that has not closed yet, and the next keepListed whose time is to come.
	Due []Instance
	// Next is the first instance not due yet; zero Name when the schedule falls no more.
	Next Instance
	// NextDueAt is when Next becomes due: the schedule's first time after now, when the window
	// moves on. Zero when the schedule falls no more.
	NextDueAt time.Time
}

// ErrTooMany is a plan that would need more than MaxDue instances at once.
var ErrTooMany = errors.New("too many instances at once")

// Plan says which instances must exist at now. It depends on the spec and now alone, so a
// controller that derives what to create from it at each look creates every instance once its
// time comes within the window, whatever it missed while it was down (an instance that closed
// meanwhile is not created: it could not trade).
func (s *Series) Plan(now time.Time) (Plan, error) {
	var p Plan
	seen := map[string]bool{}
	listedAhead := 0
	// The earliest instance still open has its time after now - closesAfter.
	for t := s.schedule.Next(now.Add(-s.closesAfter)); !t.IsZero(); t = s.schedule.Next(t) {
		if t.After(now) {
			if p.NextDueAt.IsZero() {
				p.NextDueAt = t
			}
			if listedAhead == s.keepListed {
				p.Next = s.InstanceAt(t)
				break
			}
			listedAhead++
		}
		in := s.InstanceAt(t)
		if seen[in.Name] {
			continue // the hour a clock goes back repeats a local time: one instance of that name
		}
		seen[in.Name] = true
		if len(p.Due) == MaxDue {
			return p, fmt.Errorf("%w: the schedule with closesAfter %s keeps more than %d instances open or listed; lengthen the schedule's period or shorten closesAfter: %w",
				ErrTooMany, s.closesAfter, MaxDue, &Error{"closesAfter", "too many instances at once"})
		}
		p.Due = append(p.Due, in)
	}
	return p, nil
}

// ExpiresAt is when an instance of scheduled time t, settled at settledAt, may be deleted: kept
// keepSettledFor after it settled, and no longer due (so that deleting it can never make the plan
// list it again).
func (s *Series) ExpiresAt(t, settledAt time.Time) time.Time {
	kept, due := settledAt.Add(s.keepSettled), t.Add(s.closesAfter)
	if kept.After(due) {
		return kept
	}
	return due
}

// Expired reports whether the instance of ExpiresAt may be deleted at now.
func (s *Series) Expired(t, settledAt, now time.Time) bool {
	return !s.ExpiresAt(t, settledAt).After(now)
}

// text replaces the placeholders of a template's text with the instance's time.
func text(template string, t time.Time) string {
	return strings.NewReplacer(v1alpha1.PlaceholderDate, t.Format("2006-01-02"), v1alpha1.PlaceholderTime, t.Format("15:04")).Replace(template)
}

func metaTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC())
	return &mt
}

// MarketSpec is the spec of a market series' instance: its template's, with the series' pool and
// placement.
func (s *Series) MarketSpec(in Instance) v1alpha1.MarketSpec {
	tm := s.spec.Market
	spec := v1alpha1.MarketSpec{Question: text(tm.Question, in.Time), Description: text(tm.Description, in.Time),
		Category: tm.Category, URL: tm.URL, LabelA: tm.LabelA, LabelB: tm.LabelB, ClosesAt: metaTime(in.ClosesAt),
		Fees: tm.Fees.DeepCopy(), ShardPool: s.spec.ShardPool, Placement: s.spec.Placement}
	if in.ResolvesAt != nil {
		spec.ResolvesAt = metaTime(*in.ResolvesAt)
	}
	return spec
}

// EventSpec is the spec of an event series' instance: its template's, with the series' pool and
// placement (which the event's Markets take from it).
func (s *Series) EventSpec(in Instance) v1alpha1.EventSpec {
	te := s.spec.Event
	spec := v1alpha1.EventSpec{Question: text(te.Question, in.Time), Description: text(te.Description, in.Time),
		Category: te.Category, URL: te.URL, Outcomes: append([]v1alpha1.EventOutcome(nil), te.Outcomes...), ClosesAt: metaTime(in.ClosesAt),
		Fees: te.Fees.DeepCopy(), ShardPool: s.spec.ShardPool, Placement: s.spec.Placement}
	if in.ResolvesAt != nil {
		spec.ResolvesAt = metaTime(*in.ResolvesAt)
	}
	return spec
}

// Question is the template's question, placeholders and all, as GET /series shows it.
func (s *Series) Question() string {
	if s.spec.Event != nil {
		return s.spec.Event.Question
	}
	return s.spec.Market.Question
}

// Category is the template's category.
func (s *Series) Category() string {
	if s.spec.Event != nil {
		return s.spec.Event.Category
	}
	return s.spec.Market.Category
}

// Description is the template's description, placeholders and all.
func (s *Series) Description() string {
	if s.spec.Event != nil {
		return s.spec.Event.Description
	}
	return s.spec.Market.Description
}

// Schedule is the schedule as written, and its zone.
func (s *Series) Schedule() (expr, zone string) {
	return strings.TrimSpace(s.spec.Schedule), s.loc.String()
}

// checkTemplate checks the instance the template makes at the schedule's first time by the
// Market's rules (the Event's outcomes are checked by its CRD, the same as the template's).
func (s *Series) checkTemplate() error {
	in := s.InstanceAt(s.schedule.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, s.loc)))
	if s.spec.Market != nil {
		m := v1alpha1.Market{Spec: s.MarketSpec(in)}
		m.Name = in.Name
		m.Default()
		if err := m.Validate(); err != nil {
			return &Error{"market", strings.ReplaceAll(err.Error(), "spec.", "")}
		}
		return nil
	}
	// An event's outcome market asks "<question> — <label>": check the longest through the
	// Market's rules, as the Event controller will make it.
	te := s.spec.Event
	if len(te.Outcomes) < 2 || len(te.Outcomes) > 50 {
		return &Error{"event.outcomes", fmt.Sprintf("has %d outcomes; an event has 2 to 50", len(te.Outcomes))}
	}
	spec := s.EventSpec(in)
	m := v1alpha1.Market{Spec: v1alpha1.MarketSpec{Question: spec.Question, Description: spec.Description,
		Category: spec.Category, URL: spec.URL, ClosesAt: spec.ClosesAt, ResolvesAt: spec.ResolvesAt}}
	m.Name = in.Name
	m.Default()
	if err := m.Validate(); err != nil {
		return &Error{"event", strings.ReplaceAll(err.Error(), "spec.", "")}
	}
	return nil
}
