"""The app's screens: help, the inspector, the confirmation and consent modals, history, sessions, config
(each a `modal.Modal`, whose style sheet, `styles/modals.tcss`, is read when the first one opens)."""
