// Package depcheck holds no code: its tests check the direction of the module's imports, that
// the general-purpose kits (internal/kit/...) and the plain rows (internal/records) do not reach
// up into the store, that the store's concerns (internal/store/accounts, ...) link none but its
// shared plumbing (internal/store/db), and that the store's consumers name the small interfaces
// they use rather than the aggregate store (docs/architecture.md §1).
package depcheck
