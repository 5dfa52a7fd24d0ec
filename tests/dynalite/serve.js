// Serve dynalite in memory on a loopback port and print the port (for the tests: port 0 picks a free one,
// which dynalite's own CLI cannot do). Stops when its standard input closes, so it never outlives the tests.
'use strict'
const dynalite = require('dynalite')

const host = process.env.DYNALITE_HOST || '127.0.0.1'
const port = Number(process.env.DYNALITE_PORT || 0)
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })

server.listen(port, host, () => {
  process.stdout.write(`dynalite listening on http://${host}:${server.address().port}\n`)
})
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
process.on('SIGTERM', () => process.exit(0))
