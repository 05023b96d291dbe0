"""The app's screens: help, the inspector, the confirmation and consent modals, history, sessions, config."""
