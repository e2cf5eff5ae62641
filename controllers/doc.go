// Package controllers holds pmx's operator: the Market reconciler records each Market resource in
// Postgres, carries out its lifecycle intent with the same code the standalone exchange uses
// (package shard, package market), schedules every OPEN market onto the least-loaded live shard
// and moves it when that shard's heartbeat lapses, and reports all of it in the Market's status.
package controllers
