"""Operations around the runtime: embedded broker, worker launcher, demo, replay, admin, CLI."""
