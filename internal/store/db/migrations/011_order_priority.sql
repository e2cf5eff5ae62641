-- An amend that moves an order to the back of its price level's queue (a new price, or more to
-- fill) gives it a new time priority: the next number of its market's order sequence, which no
-- order will take. A book is rebuilt in priority order: the order's own seq unless an amend set
-- priority. Null for every order that was never moved back.
alter table orders add column priority bigint;
