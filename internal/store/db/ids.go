package db

import "github.com/google/uuid"

// NewID returns a new row id for the hot tables (orders, trades, positions): a time-ordered UUID
// (version 7), so that each insert lands at the right-hand edge of the primary key's index rather
// than on a random page of it. Ids stay opaque to clients: any UUID is a valid id.
func NewID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}
