package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelSeries names the MarketSeries (in the instance's namespace) that created a Market or Event;
// the operator puts it on each instance, and on the Markets of an Event instance through its Event.
const LabelSeries = GroupName + "/series"

// AnnotationInstanceTime is the schedule's time, in RFC 3339 and in UTC, that a series' instance
// was created for: its closesAt and resolvesAt are this time plus the series' offsets.
const AnnotationInstanceTime = GroupName + "/instance-time"

// The placeholders a series' question and description may hold, replaced in each instance by its
// time in the series' time zone.
const (
	// PlaceholderDate becomes the instance's date, 2006-01-02.
	PlaceholderDate = "{date}"
	// PlaceholderTime becomes the instance's time of day, 15:04.
	PlaceholderTime = "{time}"
)

// The defaults the CRD applies to a MarketSeries' spec.
const (
	DefaultSeriesTimeZone   = "UTC"
	DefaultSeriesKeepListed = 1
	// DefaultSeriesKeepSettledFor is a week.
	DefaultSeriesKeepSettledFor = "168h"
	// MaxSeriesKeepListed is the most future instances a series may keep listed.
	MaxSeriesKeepListed = 100
	// MaxSeriesNameLength leaves room in 63 characters for the instance's suffix,
	// -yyyymmdd-hhmm (14), so that an Event instance's name still labels its Markets.
	MaxSeriesNameLength = 63 - len("-20060102-1504")
)

// SeriesMarketTemplate is the text of each Market a series lists. The question and description
// may hold {date} and {time}, replaced by the instance's date (2006-01-02) and time of day (15:04)
// in the series' time zone.
type SeriesMarketTemplate struct {
	// Question each instance asks, e.g. "Will it rain in Paris on {date}?". At most 480
	// characters, so that the question with its placeholders replaced fits a market's 500.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=480
	Question string `json:"question"`

	// Description of each instance: the resolution criteria and the source that decides it.
	// +optional
	// +kubebuilder:validation:MaxLength=9900
	Description string `json:"description,omitempty"`

	// Category the instances are listed under, e.g. "weather".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Category string `json:"category"`

	// URL of a page about the question or its resolution source: an absolute http or https URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http or https URL"
	URL string `json:"url,omitempty"`

	// LabelA is the display name of the YES outcome. Defaults to "Yes".
	// +optional
	// +kubebuilder:validation:MaxLength=50
	LabelA string `json:"labelA,omitempty"`

	// LabelB is the display name of the NO outcome. Defaults to "No".
	// +optional
	// +kubebuilder:validation:MaxLength=50
	LabelB string `json:"labelB,omitempty"`

	// Fees is each instance's fee schedule, as a Market's spec.fees (docs/fees.md); none when
	// unset. A change applies to the instances listed after it.
	// +optional
	Fees *FeeSchedule `json:"fees,omitempty"`
}

// SeriesEventTemplate is the text and outcomes of each Event a series lists; the question and
// description may hold {date} and {time} as a market template's may.
type SeriesEventTemplate struct {
	// Question each instance asks, answered by exactly one outcome. At most 425 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=425
	Question string `json:"question"`

	// Description of each instance.
	// +optional
	// +kubebuilder:validation:MaxLength=9900
	Description string `json:"description,omitempty"`

	// Category the instances are listed under.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Category string `json:"category"`

	// URL of a page about the question or its resolution source: an absolute http or https URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http or https URL"
	URL string `json:"url,omitempty"`

	// Outcomes of each instance, 2 to 50, as an Event's.
	// +required
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=50
	// +listType=map
	// +listMapKey=key
	Outcomes []EventOutcome `json:"outcomes"`

	// Fees is each instance's fee schedule, as an Event's spec.fees (docs/fees.md); none when
	// unset. A change applies to the instances listed after it.
	// +optional
	Fees *FeeSchedule `json:"fees,omitempty"`
}

// MarketSeriesSpec is a recurring market or event: a template, the schedule its instances follow,
// how many are listed ahead and how long settled ones are kept.
//
// +kubebuilder:validation:XValidation:rule="has(self.market) != has(self.event)",message="set exactly one of market and event: the template of each instance"
// +kubebuilder:validation:XValidation:rule="!has(self.resolvesAfter) || duration(self.resolvesAfter) > duration(has(self.closesAfter) ? self.closesAfter : '0s')",message="resolvesAfter must be longer than closesAfter: an instance resolves after it closes"
type MarketSeriesSpec struct {
	// Schedule is when instances fall, as a cron expression of five fields (minute, hour, day of
	// month, month, day of week; e.g. "0 18 * * *" for 18:00 every day, "0 9 * * MON" for 09:00
	// each Monday) or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly,
	// read in timeZone. Each time the schedule gives is an instance's time: its name, closesAt
	// and resolvesAt follow from it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9A-Za-z*/,?-]+( +[0-9A-Za-z*/,?-]+){4})$')",message="schedule must be five cron fields separated by spaces (minute hour day-of-month month day-of-week, e.g. '0 18 * * *') or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
	Schedule string `json:"schedule"`

	// TimeZone the schedule is read in, and the instances' names and {date} and {time} are
	// written in: an IANA name such as "Europe/Paris". Defaults to UTC.
	// +optional
	// +kubebuilder:default="UTC"
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	TimeZone string `json:"timeZone,omitempty"`

	// ClosesAfter is how long after its time each instance stops trading: its closesAt is its
	// time plus this (e.g. "0s" to close at the scheduled time, "24h" a day later). Defaults to
	// 0s.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="closesAfter must be 0s or more"
	ClosesAfter *metav1.Duration `json:"closesAfter,omitempty"`

	// ResolvesAfter is how long after its time each instance is expected to be resolved: its
	// resolvesAt is its time plus this. Longer than closesAfter. Unset, instances have no
	// resolvesAt.
	// +optional
	ResolvesAfter *metav1.Duration `json:"resolvesAfter,omitempty"`

	// KeepListed is how many instances whose time is still to come are listed ahead, from 0 to
	// 100. The operator also lists every instance whose time has come and that has not closed
	// yet. With 0, each instance is created at its time. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	KeepListed *int32 `json:"keepListed,omitempty"`

	// KeepSettledFor is how long a settled instance (RESOLVED or CANCELED) is kept as a resource
	// once it has paid out and closed; then the operator deletes it. Its market stays in the
	// exchange and in the API. Defaults to 168h (a week).
	// +optional
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="keepSettledFor must be 0s or more"
	KeepSettledFor *metav1.Duration `json:"keepSettledFor,omitempty"`

	// Market is the template of each instance when the series lists YES/NO Markets.
	// +optional
	Market *SeriesMarketTemplate `json:"market,omitempty"`

	// Event is the template of each instance when the series lists Events.
	// +optional
	Event *SeriesEventTemplate `json:"event,omitempty"`

	// ShardPool names the ShardPool, in the operator's namespace, whose shards serve every
	// instance: each Market instance's spec.shardPool, or each Event instance's (which its Markets
	// take). Unset, the default pool. A change applies to the instances listed after it; those
	// listed already keep theirs (change an instance's own spec.shardPool to move it).
	// +optional
	// +kubebuilder:validation:MaxLength=46
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	ShardPool string `json:"shardPool,omitempty"`

	// Placement is Shared (the default) or Dedicated: each instance's spec.placement, as
	// shardPool is. Dedicated keeps each instance (its market, or its event's markets) alone on a
	// shard of its pool, so that the pool needs a shard for each instance OPEN at once, those
	// listed ahead included (the ShardPool's spec.maxDedicatedShards). A change applies to the
	// instances listed after it; those listed already keep theirs.
	// +optional
	// +kubebuilder:validation:Enum=Shared;Dedicated
	Placement Placement `json:"placement,omitempty"`
}

// MarketSeriesStatus is what the operator last observed and did.
type MarketSeriesStatus struct {
	// SeriesID is the series' id in the REST API (GET /api/v1/series/{id}, and each instance
	// market's seriesId).
	// +optional
	SeriesID string `json:"seriesId,omitempty"`

	// LastInstance is the name of the latest instance (by time) the series lists.
	// +optional
	LastInstance string `json:"lastInstance,omitempty"`

	// LastInstanceTime is the last instance's scheduled time.
	// +optional
	LastInstanceTime *metav1.Time `json:"lastInstanceTime,omitempty"`

	// NextInstance is the name of the next instance the operator will create.
	// +optional
	NextInstance string `json:"nextInstance,omitempty"`

	// NextInstanceTime is the next instance's scheduled time; it is created keepListed times of
	// the schedule earlier.
	// +optional
	NextInstanceTime *metav1.Time `json:"nextInstanceTime,omitempty"`

	// Instances is how many instances the series has as resources now.
	// +optional
	Instances int32 `json:"instances,omitempty"`

	// Conditions of the series: Ready (the schedule and template are valid, the series is
	// recorded and every instance due is listed).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ObservedGeneration is the metadata.generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// MarketSeries lists a Market or an Event again and again from one template on a schedule: a
// daily weather market, a weekly index range. Each instance is created with a name made of the
// series' and its time (<series>-<yyyymmdd>-<hhmm>, in the series' time zone), owned by the
// series.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=marketseries,singular=marketseries,scope=Namespaced,shortName=mser;series,categories=pmx
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 49",message="metadata.name of a MarketSeries must be at most 49 characters (its instances' names add -yyyymmdd-hhmm)"
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`,description="When instances fall"
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.spec.timeZone`,description="The schedule's time zone"
// +kubebuilder:printcolumn:name="Last",type=string,JSONPath=`.status.lastInstance`,description="Latest instance listed"
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextInstance`,description="Next instance to be created"
// +kubebuilder:printcolumn:name="Instances",type=integer,JSONPath=`.status.instances`,description="Instances kept as resources"
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.status.seriesId`,priority=1,description="Series id in the REST API"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MarketSeries struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// Spec is the template, schedule and retention of the series.
	// +required
	Spec MarketSeriesSpec `json:"spec"`

	// Status is what the operator last observed and did.
	// +optional
	Status MarketSeriesStatus `json:"status,omitzero"`
}

// MarketSeriesList is a list of MarketSeries.
//
// +kubebuilder:object:root=true
type MarketSeriesList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []MarketSeries `json:"items"`
}
