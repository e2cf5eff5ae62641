-- Account names are unique whatever their case: "ALICE" and "alice" were two accounts, which a
-- person reading a name could not tell apart, and sign-in by name is now case-insensitive (lower()
-- of the name finds the account; names are ASCII, so lower() means the same under every collation).
--
-- A database that already holds names differing only in case cannot take the index. Rather than
-- pick an account to rename (its owner signs in and trades by that name), the migration stops with
-- the names listed, changing nothing; an operator renames all but one of each group, for example
--   update accounts set name = name || '-2' where id = ...;
-- and runs the migration again.
do $$
declare
    clashes text;
begin
    select string_agg(names, '; ') into clashes
    from (select string_agg(name || ' (id ' || id || ')', ', ' order by id) as names
          from accounts group by lower(name) having count(*) > 1) c;
    if clashes is not null then
        raise exception 'account names differ only in case: %', clashes
            using hint = 'rename all but one account of each group, then migrate again (see store/migrations/008_account_names_any_case.sql)';
    end if;
end
$$;

create unique index accounts_name_any_case on accounts (lower(name));
-- The exact-name constraint is implied by the new index, and would cost every insert an index.
alter table accounts drop constraint accounts_name_key;
