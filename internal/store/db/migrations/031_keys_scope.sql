-- The scope keys (issue 51; internal/kit/auth owns the rules): a key that may also make and revoke
-- its account's keys through the API (POST and DELETE /api/v1/account/keys), as the settings page
-- does. It comes last of the nested scopes, since a key that makes keys can do whatever a key it
-- makes can. No row becomes keys here: a key is made keys only when asked.
--
-- The release before reads a keys key's scope as one it does not know, which allows nothing
-- (auth.Scope.Allows): during a rolling upgrade its fronts refuse such a key with 403
-- insufficient_scope, never give it more (docs/architecture.md §9).
alter table api_keys drop constraint api_keys_scope_check,
    add constraint api_keys_scope_check check (scope in ('read', 'cancel', 'trade', 'keys'));
