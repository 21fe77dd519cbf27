# onetool run examples/snippets/time_in_cities.py   (with the example onetool.yaml)
cities = {"Paris": "Europe/Paris", "Tokyo": "Asia/Tokyo", "New York": "America/New_York"}
{city: time.get_current_time(timezone=tz)["datetime"][11:16] for city, tz in cities.items()}
