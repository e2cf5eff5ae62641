-- Recurring markets (issue 55, part 3; internal/series owns the rules, the MarketSeries resource
-- of api/v1alpha1 defines them): a series lists a Market or an Event again and again from one
-- template on a cron schedule. The operator records each MarketSeries here and links each
-- instance's market (and an event instance's event and markets) to it, so that GET /series and
-- each market's seriesId let a bot find the next one.
--
-- Everything here is additive, so the previous release keeps working on this schema (§9): it
-- never reads series nor the new columns, and a market of a series is an ordinary market to it.
--
-- kind: what each instance is, a MARKET or an EVENT. question, description: the template's, with
-- its {date} and {time} placeholders. schedule, time_zone: as the resource has them.
-- next_instance_at: the scheduled time of the next instance to be listed, as the operator last
-- worked it out; null when the schedule falls no more. ended_at: the resource was deleted; the
-- row stays for its markets' sake and is no longer listed.
create table series (
    id                uuid primary key,
    name              text not null unique, -- metadata.name of the MarketSeries resource
    kind              text not null check (kind in ('MARKET', 'EVENT')),
    question          text not null,
    description       text,
    category          text not null,
    schedule          text not null,
    time_zone         text not null,
    next_instance_at  timestamptz,
    ended_at          timestamptz,
    created_at        timestamptz not null,
    updated_at        timestamptz not null
);
create index series_created on series (created_at desc, id desc);

alter table markets add column series_id uuid references series (id);
alter table events add column series_id uuid references series (id);
create index markets_series on markets (series_id, closes_at) where series_id is not null;
create index events_series on events (series_id, closes_at) where series_id is not null;
