-- Every time pmx takes lies from 1970 to the end of 9999 in UTC (domain.CheckTime). Before that
-- bound, the admin API and the operator stored a market's closesAt or resolvesAt as given, and a
-- valid RFC 3339 time such as 9999-12-31T23:59:59-23:59 is in year 10000 in UTC, which no JSON
-- encoder writes: from then on GET /api/v1/markets failed for everyone. Such a time is brought to
-- the nearest bound, where it means what it meant (never, or long ago). Markets are the only rows
-- that could hold one: an order with such an expiry failed its batch and was never stored.
update markets set closes_at = '9999-12-31 23:59:59.999999+00' where closes_at > '9999-12-31 23:59:59.999999+00';
update markets set resolves_at = '9999-12-31 23:59:59.999999+00' where resolves_at > '9999-12-31 23:59:59.999999+00';
update markets set closes_at = '1970-01-01 00:00:00+00' where closes_at < '1970-01-01 00:00:00+00';
update markets set resolves_at = '1970-01-01 00:00:00+00' where resolves_at < '1970-01-01 00:00:00+00';
