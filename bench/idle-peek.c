/*
 * bench/idle-peek.c: what the worker's check for a session the server ended
 * while idle costs, against the cheapest call it guards (bench/README.md,
 * the thirty-ninth round's daemon change).
 *
 * Before each call on its control, finish and heartbeat connections the
 * worker asks PQtransactionStatus and peeks at the socket with one
 * non-blocking recv(MSG_PEEK) (pg::Connection::ended_while_idle).  This
 * times a million of those on an idle libpq connection, then 20 000 round
 * trips of a prepared SELECT 1 on the same connection, three rounds, and
 * prints each round's ratio.
 *
 * Build and run (the database from the libpq PG* variables, or a conninfo):
 *   cc -O2 -o /tmp/idle-peek bench/idle-peek.c -I"$(pg_config --includedir)" -lpq
 *   /tmp/idle-peek ["dbname=postgres"]
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>

static double
seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	PGconn	   *conn = PQconnectdb(argc > 1 ? argv[1] : "");
	char		buf[1024];
	long		bytes_seen = 0;

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "idle-peek: %s", PQerrorMessage(conn));
		return 1;
	}
	PQclear(PQprepare(conn, "one", "SELECT 1", 0, NULL));
	for (int round = 1; round <= 3; round++)
	{
		const int	peeks = 1000000,
					calls = 20000;
		double		t0 = seconds(),
					peek,
					call;

		for (int i = 0; i < peeks; i++)
			if (PQtransactionStatus(conn) == PQTRANS_IDLE &&
				recv(PQsocket(conn), buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT) >= 0)
				bytes_seen++;
		peek = (seconds() - t0) / peeks;
		t0 = seconds();
		for (int i = 0; i < calls; i++)
			PQclear(PQexecPrepared(conn, "one", 0, NULL, NULL, NULL, 0));
		call = (seconds() - t0) / calls;
		printf("round %d: peek %.2f us, SELECT 1 round trip %.1f us, peek / round trip %.1f%%\n",
			   round, peek * 1e6, call * 1e6, 100 * peek / call);
	}
	if (bytes_seen)
		printf("the server sent %ld times unasked: not an idle session\n", bytes_seen);
	PQfinish(conn);
	return 0;
}
