"""Validity intervals (Fabret et al., section 1): subscription deadlines (``deadlines``) and the still-valid
events a new subscription is matched against (``event_store``)."""
